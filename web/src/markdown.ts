// Markdown for answers (markdown-it, raw HTML off: what the model writes
// is escaped, never run) and highlighting for code blocks and files
// (highlight.js with the languages agents write most).
import MarkdownIt from "markdown-it";
import { DiffLine, LineKind, parseUnified } from "./diff";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import dockerfile from "highlight.js/lib/languages/dockerfile";
import go from "highlight.js/lib/languages/go";
import ini from "highlight.js/lib/languages/ini";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import makefile from "highlight.js/lib/languages/makefile";
import markdown from "highlight.js/lib/languages/markdown";
import plaintext from "highlight.js/lib/languages/plaintext";
import python from "highlight.js/lib/languages/python";
import ruby from "highlight.js/lib/languages/ruby";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

const languages = {
  bash, c, cpp, css, diff, dockerfile, go, ini, java, javascript, json, makefile,
  markdown, plaintext, python, ruby, rust, shell, sql, typescript, xml, yaml,
};
for (const [name, lang] of Object.entries(languages)) hljs.registerLanguage(name, lang);

/** byExtension names the language of a file from its name. */
const byExtension: Record<string, string> = {
  sh: "bash", bash: "bash", zsh: "bash", c: "c", h: "c", cc: "cpp", cpp: "cpp", hpp: "cpp",
  css: "css", diff: "diff", patch: "diff", go: "go", mod: "go", ini: "ini", toml: "ini", cfg: "ini",
  java: "java", js: "javascript", mjs: "javascript", cjs: "javascript", jsx: "javascript",
  json: "json", jsonc: "json", yao: "json", md: "markdown", py: "python", rb: "ruby", rs: "rust",
  sql: "sql", ts: "typescript", tsx: "typescript", mts: "typescript", html: "xml", htm: "xml",
  xml: "xml", svg: "xml", yml: "yaml", yaml: "yaml", txt: "plaintext", log: "plaintext",
};

export function languageOf(name: string): string | undefined {
  const base = name.split("/").pop()!.toLowerCase();
  if (base === "dockerfile") return "dockerfile";
  if (base === "makefile") return "makefile";
  const ext = base.includes(".") ? base.split(".").pop()! : "";
  return byExtension[ext];
}

const escapeHTML = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/** highlight returns code as highlighted HTML (escaped as it is when the
 * language is unknown). */
export function highlight(code: string, lang?: string): string {
  try {
    if (lang && hljs.getLanguage(lang)) return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
  } catch {
    // fall through to plain text
  }
  return escapeHTML(code);
}

const signs: Record<LineKind, string> = { add: "+", del: "-", same: " ", hunk: "", meta: "" };

/** diffHTML renders diff lines, each highlighted in lang when given. */
export function diffHTML(lines: DiffLine[], lang?: string): string {
  return lines
    .map((l) => {
      const body = l.kind === "hunk" || l.kind === "meta" ? escapeHTML(l.text) : highlight(l.text, lang);
      return `<span class="dl ${l.kind}"><span class="sign" aria-hidden="true">${signs[l.kind]}</span>${body}</span>\n`;
    })
    .join("");
}

/** codeBlock is a fenced block as the page shows it: a header with its
 * language and a copy button, then the code (a diff with its lines
 * marked). */
export function codeBlock(code: string, lang: string, label = lang): string {
  const isDiff = lang === "diff" || lang === "patch";
  const body = isDiff ? diffHTML(parseUnified(code)) : highlight(code, lang);
  return (
    `<div class="code-block${isDiff ? " diff" : ""}"><div class="code-head"><span class="lang">${escapeHTML(label || "text")}</span>` +
    `<button type="button" class="copy" aria-label="Copy the code">Copy</button></div>` +
    `<pre class="hljs"><code>${body}</code></pre></div>`
  );
}

const md = new MarkdownIt({ html: false, linkify: true, breaks: false });

md.renderer.rules.fence = (tokens, idx) => {
  const t = tokens[idx];
  const lang = t.info.trim().split(/\s+/)[0].toLowerCase();
  return codeBlock(t.content, byExtension[lang] ?? lang, lang);
};
// Wide tables scroll on their own, not the whole answer.
md.renderer.rules.table_open = () => '<div class="table-wrap"><table>\n';
md.renderer.rules.table_close = () => "</table></div>\n";

// Links open in a new tab, without access to this page.
const defaultLink = md.renderer.rules.link_open ?? ((tokens, idx, opts, _env, self) => self.renderToken(tokens, idx, opts));
md.renderer.rules.link_open = (tokens, idx, opts, env, self) => {
  tokens[idx].attrSet("target", "_blank");
  tokens[idx].attrSet("rel", "noopener noreferrer");
  return defaultLink(tokens, idx, opts, env, self);
};

/** renderMarkdown turns Markdown into safe HTML. */
export function renderMarkdown(text: string): string {
  return md.render(text);
}

/** copyCode handles a click on a code block's copy button inside el. */
export function copyCode(ev: MouseEvent) {
  const btn = (ev.target as HTMLElement).closest?.("button.copy");
  if (!btn) return;
  const code = btn.closest(".code-block")?.querySelector("pre")?.textContent ?? "";
  const done = (label: string) => {
    btn.textContent = label;
    setTimeout(() => (btn.textContent = "Copy"), 1500);
  };
  navigator.clipboard?.writeText(code).then(
    () => done("Copied"),
    () => done("Not copied"),
  );
}
