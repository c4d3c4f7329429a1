// Before and after functions of the greeter's JSONL cases, in Yao's form:
// "before": "env_test.Before", and --before env_test.BeforeAll.

function Before(ctx: any, testCase: any) {
  console.log(`Before ${testCase.id}`);
  ctx.memory.user.Set(`before:${testCase.id}`, true);
  return { data: { prepared: testCase.id, at: Date.now() } };
}

function After(ctx: any, testCase: any, result: any, beforeData: any) {
  console.log(`After ${testCase.id}: ${result.status} (prepared ${beforeData && beforeData.prepared})`);
  ctx.memory.user.Del(`before:${testCase.id}`);
}

function BeforeAll(ctx: any, testCases: any[]) {
  console.log(`BeforeAll: ${testCases.length} cases`);
  return { data: { suite: "greeter" } };
}

function AfterAll(ctx: any, results: any[], beforeData: any) {
  const passed = results.filter((r) => r.status === "passed").length;
  console.log(`AfterAll: ${passed}/${results.length} passed (${beforeData && beforeData.suite})`);
}

function BeforeBroken(ctx: any, testCase: any) {
  throw new Error(`cannot prepare ${testCase.id}`);
}
