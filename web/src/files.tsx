// The chat's workspace: a file tree that refreshes as the agent's tools
// run (hidden files, such as the CLI's own .agentbox folder, only on
// request), a viewer (highlighted text, images, a download for the rest),
// uploads, and the whole workspace as a zip.
import { useEffect, useRef, useState } from "preact/hooks";
import * as api from "./api";
import { Icon } from "./icons";
import { highlight, languageOf } from "./markdown";

const hiddenKey = "agentbox.showHidden";

interface Props {
  chatId: string;
  /** version changes when a tool ran or a turn ended: time to refresh. */
  version: number;
  onError: (e: unknown) => void;
  onChanged: () => void;
}

const join = (dir: string, name: string) => (dir === "." ? name : dir + "/" + name);

export function Files({ chatId, version, onError, onChanged }: Props) {
  // Folder listings by path; a folder is open when it has one.
  const [dirs, setDirs] = useState<Map<string, api.FileInfo[]>>(new Map());
  const [missing, setMissing] = useState(false);
  const [selected, setSelected] = useState("");
  const [target, setTarget] = useState(".");
  const [busy, setBusy] = useState("");
  const [showHidden, setShowHidden] = useState(localStorage.getItem(hiddenKey) === "1");
  const input = useRef<HTMLInputElement>(null);
  const dirsRef = useRef(dirs);
  dirsRef.current = dirs;

  const refresh = async (paths?: string[]) => {
    const want = paths ?? (dirsRef.current.size ? [...dirsRef.current.keys()] : ["."]);
    const next = new Map(dirsRef.current);
    for (const p of want) {
      try {
        next.set(p, await api.listDir(chatId, p));
        if (p === ".") setMissing(false);
      } catch (e) {
        next.delete(p);
        if (e instanceof api.ApiError && e.status === 404) {
          if (p === ".") setMissing(true);
          continue;
        }
        onError(e);
        return;
      }
    }
    setDirs(next);
  };

  // The first listing, then one shortly after each tool run (bursts of
  // tool results make one refresh).
  useEffect(() => {
    const t = setTimeout(() => refresh(), version === 0 ? 0 : 400);
    return () => clearTimeout(t);
  }, [chatId, version]);

  const toggle = (path: string) => {
    if (dirs.has(path)) {
      const next = new Map(dirs);
      for (const k of next.keys()) if (k === path || k.startsWith(path + "/")) next.delete(k);
      setDirs(next);
    } else refresh([path]);
  };

  const uploadFiles = async (files: FileList | null) => {
    if (!files?.length) return;
    try {
      for (const f of Array.from(files)) {
        setBusy(`Uploading ${f.name}…`);
        await api.upload(chatId, join(target, f.name), f);
      }
      await refresh();
      onChanged();
    } catch (e) {
      onError(e);
    } finally {
      setBusy("");
      if (input.current) input.current.value = "";
    }
  };

  const zip = async () => {
    setBusy("Preparing the zip…");
    try {
      await api.download(chatId, ".", true, chatId + ".zip");
    } catch (e) {
      onError(e);
    } finally {
      setBusy("");
    }
  };

  const tree = (path: string, depth: number): preact.JSX.Element[] =>
    (dirs.get(path) ?? []).flatMap((e) => {
      if (!showHidden && e.name.startsWith(".")) return [];
      const p = join(path, e.name);
      const open = dirs.has(p);
      const row = (
        <li key={p} role="treeitem" aria-expanded={e.is_dir ? open : undefined} aria-selected={p === selected || (e.is_dir && p === target)} aria-level={depth + 1}>
          <button
            type="button"
            class={e.is_dir ? "dir" : "file"}
            style={{ paddingLeft: 0.5 + depth * 1 + "em" }}
            onClick={() => {
              if (e.is_dir) {
                setTarget(p);
                toggle(p);
              } else setSelected(p);
            }}
          >
            <span class={"twisty" + (open ? " open" : "")} aria-hidden="true">
              {e.is_dir && <Icon name="chevron" size={12} />}
            </span>
            <Icon name={e.is_dir ? "folder" : "file"} size={15} />
            <span class="fname">{e.name}</span>
            {!e.is_dir && <span class="size">{formatSize(e.size)}</span>}
          </button>
        </li>
      );
      return e.is_dir && open ? [row, ...tree(p, depth + 1)] : [row];
    });

  const rows = tree(".", 0);
  const hiddenOnly = (dirs.get(".") ?? []).length > 0;
  return (
    <div
      class="files"
      onDragOver={(e) => e.preventDefault()}
      onDrop={(e) => {
        e.preventDefault();
        uploadFiles(e.dataTransfer?.files ?? null);
      }}
    >
      <div class="toolbar">
        <button type="button" class="icon" onClick={() => refresh()} aria-label="Refresh the file tree" title="Refresh">
          <Icon name="refresh" />
        </button>
        <button type="button" class="icon" onClick={() => input.current?.click()} aria-label={`Upload files to ${target === "." ? "the workspace" : target}`} title="Upload">
          <Icon name="upload" />
        </button>
        <input id="upload-input" ref={input} type="file" multiple hidden aria-label="Files to upload" onChange={(e) => uploadFiles(e.currentTarget.files)} />
        <button type="button" class="icon" onClick={zip} disabled={missing} aria-label="Download the workspace as a zip" title="Download as zip">
          <Icon name="download" />
        </button>
        <button
          type="button"
          class="icon"
          aria-pressed={showHidden}
          aria-label="Show hidden files"
          title={showHidden ? "Hide hidden files" : "Show hidden files"}
          onClick={() => {
            localStorage.setItem(hiddenKey, showHidden ? "0" : "1");
            setShowHidden(!showHidden);
          }}
        >
          <Icon name="eye" />
        </button>
        <span class="grow" />
        {target !== "." && (
          <button type="button" class="link" onClick={() => setTarget(".")} aria-label="Upload to the workspace's top folder">
            uploads go to {target} ×
          </button>
        )}
      </div>
      {busy && <p role="status" class="hint">{busy}</p>}
      {missing ? (
        <p class="hint">No workspace yet: it appears when the assistant first works in a sandbox, or when you upload a file.</p>
      ) : (
        <ul class="tree" role="tree" aria-label="Workspace files">
          {rows.length > 0 ? rows : dirs.has(".") && <li class="hint">{hiddenOnly ? "Only hidden files so far." : "The workspace is empty."}</li>}
        </ul>
      )}
      {selected && <Viewer key={selected + version} chatId={chatId} path={selected} onClose={() => setSelected("")} onError={onError} />}
    </div>
  );
}

function formatSize(n: number): string {
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}

// Text files are shown up to this size.
const viewLimit = 1 << 20;

function Viewer({ chatId, path, onClose, onError }: { chatId: string; path: string; onClose: () => void; onError: (e: unknown) => void }) {
  const [view, setView] = useState<{ kind: "text"; html: string; cut: boolean } | { kind: "image"; url: string } | { kind: "binary"; size: number } | null>(null);
  useEffect(() => {
    let url = "";
    let gone = false;
    api
      .fetchFile(chatId, path, viewLimit)
      .then(async ({ blob, type, total }) => {
        if (gone) return;
        if (type.startsWith("image/")) {
          url = URL.createObjectURL(blob);
          setView({ kind: "image", url });
          return;
        }
        const buf = new Uint8Array(await blob.arrayBuffer());
        const textual = type.startsWith("text/") || type.includes("json") || type.includes("javascript") || languageOf(path) !== undefined;
        if (!textual && buf.subarray(0, 8000).includes(0)) {
          setView({ kind: "binary", size: total });
          return;
        }
        const text = new TextDecoder().decode(buf);
        setView({ kind: "text", html: highlight(text, languageOf(path)), cut: total > buf.length });
      })
      .catch(onError);
    return () => {
      gone = true;
      if (url) URL.revokeObjectURL(url);
    };
  }, [chatId, path]);

  const name = path.split("/").pop()!;
  return (
    <section class="viewer" aria-label={"File " + path}>
      <header>
        <h3>{path}</h3>
        <button type="button" class="icon" onClick={() => api.download(chatId, path, false, name).catch(onError)} aria-label={"Download " + name} title="Download">
          <Icon name="download" />
        </button>
        <button type="button" class="icon" onClick={onClose} aria-label="Close the file" title="Close">
          <Icon name="close" />
        </button>
      </header>
      {!view && <p role="status">Loading…</p>}
      {view?.kind === "text" && (
        <>
          <pre class="hljs code">
            <code dangerouslySetInnerHTML={{ __html: view.html }} />
          </pre>
          {view.cut && <p class="hint">Only the first {formatSize(viewLimit)} are shown: download the file for all of it.</p>}
        </>
      )}
      {view?.kind === "image" && <img src={view.url} alt={name} />}
      {view?.kind === "binary" && <p class="hint">A binary file of {formatSize(view.size)}: download it to open it.</p>}
    </section>
  );
}
