// Validates agentbox's OpenAPI description with @readme/openapi-parser
// (OpenAPI 3.1, with its default rules as errors) and prints the result
// as one JSON object (openapi_test.go checks it).
//
// argv[2]: the OpenAPI JSON file.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { compileErrors, validate } from '@readme/openapi-parser';

const require = createRequire(import.meta.url);
const spec = JSON.parse(readFileSync(process.env.OPENAPI_FILE, 'utf8'));
const result = await validate(spec, { validate: { errors: { colorize: false } } });
console.log(JSON.stringify({
  version: require('@readme/openapi-parser/package.json').version,
  valid: result.valid,
  specification: result.specification,
  errors: result.valid ? '' : compileErrors(result),
  warnings: result.warnings,
}));
