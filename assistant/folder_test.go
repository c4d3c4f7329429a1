package assistant

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFolderWarnings: what an assistant folder holds that nothing reads
// gets a warning naming the file, with the name it was likely meant to
// have; an assistant with no prompt gets one too. What is read, and
// what people keep beside it, gets none.
func TestFolderWarnings(t *testing.T) {
	t.Parallel()
	const pkg = `{"connector": "c"}`
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  []string // warnings, as Problem.String
	}{
		{"prompts file misnamed", map[string]string{"a/package.yao": pkg, "a/prompt.yml": "- role: system\n  content: hi\n"}, []string{
			"assistants/a: warning: the assistant has no prompt (no prompts.yml, no prompts in package.yao, no global agent/prompts.yml): the model gets the user's messages and nothing of this assistant's role",
			"assistants/a/prompt.yml: warning: this file is not used (did you mean prompts.yml?)",
		}},
		{"hooks in the wrong file", map[string]string{"a/package.yao": pkg, "a/prompts.yml": "- role: system\n  content: hi\n", "a/src/hooks.ts": "function Create() {}"}, []string{
			"assistants/a/src: warning: no hooks run: they are read from src/index.ts or src/index.js only, and hooks.ts is neither (rename the entry file to index.ts)",
		}},
		{"hooks exported from the wrong file", map[string]string{"a/package.yao": pkg, "a/prompts.yml": "- role: system\n  content: hi\n", "a/src/main.js": "module.exports = { Next: function () { return null } };"}, []string{
			"assistants/a/src: warning: no hooks run: they are read from src/index.ts or src/index.js only, and main.js is neither (rename the entry file to index.ts)",
		}},
		{"process scripts without an entry", map[string]string{"a/package.yao": pkg, "a/prompts.yml": "- role: system\n  content: hi\n",
			"a/src/checks.ts": "export function Lint(args: { code: string }) { return { issues: [] } }", "a/src/tools.js": "function CreateUser() {}\nfunction Hello() { return 'hi' }"}, nil},
		{"unknown folder and file", map[string]string{"a/package.yao": pkg, "a/prompts.yml": "- role: system\n  content: hi\n", "a/scripts/x.ts": "", "a/notes.txt": ""}, []string{
			"assistants/a/notes.txt: warning: this file is not used: an assistant folder is read for " + folderUse,
			"assistants/a/scripts: warning: this folder is not used: an assistant folder is read for " + folderUse,
		}},
		{"locale folder misnamed", map[string]string{"a/package.yao": pkg, "a/prompts.yml": "- role: system\n  content: hi\n", "a/locale/en.yml": "x: y\n"}, []string{
			"assistants/a/locale: warning: this folder is not used (did you mean locales?)",
		}},
		{"everything read, and what people keep", map[string]string{
			"a/package.yao": pkg, "a/prompts.yml": "- role: system\n  content: hi\n", "a/README.md": "", "a/tsconfig.json": "{}",
			"a/.gitignore": "", "a/node_modules/x/index.js": "", "a/src/index.ts": "function Create() { return null }", "a/src/util.ts": "",
			"a/prompts/short.yml": "- role: system\n  content: hi\n", "a/assets/x.md": "", "a/team/package.yao": pkg, "a/team/prompts.yml": "- role: system\n  content: hi\n",
			"a/deep/er/package.yao": pkg, "a/deep/er/prompts.yml": "- role: system\n  content: hi\n",
		}, nil},
		{"what a prepare step copies", map[string]string{"a/package.yao": `{"connector": "c", "sandbox": {"version": "2.0", "computer": {"image": "i"}, "runner": {"name": "claude"}, "prepare": [{"action": "copy", "src": "templates/web", "dst": "~/web"}]}}`,
			"a/prompts.yml": "- role: system\n  content: hi\n", "a/templates/web/index.html": ""}, nil},
		{"a prompt in package.yao", map[string]string{"a/package.yao": `{"connector": "c", "prompts": [{"role": "system", "content": "hi"}]}`}, nil},
		{"a preset only", map[string]string{"a/package.yao": pkg, "a/prompts/chat.yml": "- role: system\n  content: hi\n"}, nil},
		{"global prompts", map[string]string{"a/package.yao": pkg, "../agent/prompts.yml": "- role: system\n  content: hi\n"}, nil},
		{"global prompts disabled", map[string]string{"a/package.yao": `{"connector": "c", "disable_global_prompts": true}`, "../agent/prompts.yml": "- role: system\n  content: hi\n"}, []string{
			"assistants/a: warning: the assistant has no prompt (no prompts.yml, no prompts in package.yao, no global agent/prompts.yml): the model gets the user's messages and nothing of this assistant's role",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			files := map[string]string{"connectors/c.conn.yao": `{"type": "openai", "options": {"model": "m", "key": "k"}}`}
			for p, c := range tt.files {
				files[filepath.Join(AssistantsDir, p)] = c
			}
			for p, c := range files {
				full := filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := Inspect(root)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range r.Problems {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
