package web

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

var update = flag.Bool("update", false, "write the screenshots of TestWebScreens into docs/screenshots")

// A width the app is looked at: a phone's, a tablet's (where the side
// panel slides over the chat) and a desktop's (three columns).
type width struct {
	name   string
	w, h   int64
	mobile bool
}

var widths = []width{{"phone", 390, 844, true}, {"tablet", 820, 1000, true}, {"desktop", 1440, 900, false}}

// resize sets the viewport to w.
func (b *browser) resize(w width) {
	b.t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if w.mobile {
		opts = append(opts, chromedp.EmulateMobile)
	}
	b.run(10*time.Second, "resize to "+w.name, chromedp.EmulateViewport(w.w, w.h, opts...))
	// The layout settles (the side panel's slide) before anything is read.
	b.waitFor(5*time.Second, "the viewport is "+w.name, fmt.Sprintf(`window.innerWidth === %d`, w.w))
	b.run(5*time.Second, "settle", chromedp.Sleep(300*time.Millisecond))
}

// shot keeps a screenshot of the viewport as NAME-WIDTH.png: under
// .cache/artifacts/web/screens always, and in docs/screenshots with
// -update.
func (b *browser) shot(name string, w width) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s at %s: %v", name, w.name, err)
	}
	small, err := compress(raw)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	file := name + "-" + w.name + ".png"
	dirs := []string{filepath.Join(testenv.RepoRoot(), ".cache", "artifacts", "web", "screens")}
	if *update {
		dirs = append(dirs, filepath.Join(testenv.RepoRoot(), "docs", "screenshots"))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), small, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	b.t.Logf("screenshot %s (%d KB)", filepath.Join(dirs[len(dirs)-1], file), len(small)>>10)
}

// compress re-encodes a screenshot with at most 256 colours (a UI's flat
// colours and anti-aliased text lose nothing a reader sees) at the best
// compression: a tenth of the size.
func compress(raw []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	pal := palette(img, 256)
	b := img.Bounds()
	out := image.NewPaletted(b, pal)
	cache := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := cache[c]
			if !ok {
				i = uint8(pal.Index(c))
				cache[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// palette picks n colours for img by median cut over its colours
// weighted by how often they occur.
func palette(img image.Image, n int) color.Palette {
	type entry struct {
		c     [3]int
		count int
	}
	counts := map[[3]int]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			counts[[3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}]++
		}
	}
	all := make([]entry, 0, len(counts))
	for c, k := range counts {
		all = append(all, entry{c, k})
	}
	boxes := [][]entry{all}
	for len(boxes) < n {
		// Split the box with the widest channel range (weighted by size).
		best, bestCh, bestScore := -1, 0, 0
		for i, box := range boxes {
			if len(box) < 2 {
				continue
			}
			for ch := 0; ch < 3; ch++ {
				lo, hi, total := 255, 0, 0
				for _, e := range box {
					lo, hi = min(lo, e.c[ch]), max(hi, e.c[ch])
					total += e.count
				}
				if score := (hi - lo) * (1 + intLog(total)); score > bestScore {
					best, bestCh, bestScore = i, ch, score
				}
			}
		}
		if best < 0 {
			break
		}
		box := boxes[best]
		ch := bestCh
		slices.SortFunc(box, func(a, b entry) int { return a.c[ch] - b.c[ch] })
		total := 0
		for _, e := range box {
			total += e.count
		}
		half, cut := 0, 1
		for i, e := range box {
			half += e.count
			if half*2 >= total {
				cut = max(1, min(len(box)-1, i+1))
				break
			}
		}
		boxes = append(boxes[:best], append([][]entry{box[:cut], box[cut:]}, boxes[best+1:]...)...)
	}
	pal := make(color.Palette, 0, len(boxes))
	for _, box := range boxes {
		var r, g, bl, total int
		for _, e := range box {
			r += e.c[0] * e.count
			g += e.c[1] * e.count
			bl += e.c[2] * e.count
			total += e.count
		}
		pal = append(pal, color.RGBA{uint8(r / total), uint8(g / total), uint8(bl / total), 255})
	}
	return pal
}

func intLog(n int) int {
	k := 0
	for n > 1 {
		n >>= 1
		k++
	}
	return k
}

// exists reports whether sel matches an element now.
func (b *browser) exists(sel string) bool {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`!!document.querySelector(%s)`, q)))
	if err != nil {
		b.t.Fatalf("query %s: %v", sel, err)
	}
	return ok
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// click clicks the first element sel matches, once it is visible.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.run(15*time.Second, "click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// noHorizontalScroll fails when the page or its chat scrolls sideways.
func (b *browser) noHorizontalScroll(where string) {
	b.t.Helper()
	got := eval[string](b, `(() => {
		const out = [];
		const de = document.documentElement;
		if (de.scrollWidth > window.innerWidth) out.push("page " + de.scrollWidth + " > " + window.innerWidth);
		for (const sel of [".main", ".log", ".thread", ".composer"]) {
			const el = document.querySelector(sel);
			if (el && el.scrollWidth > el.clientWidth + 1) out.push(sel + " " + el.scrollWidth + " > " + el.clientWidth);
		}
		return out.join("; ");
	})()`)
	if got != "" {
		b.t.Errorf("%s scrolls sideways: %s", where, got)
	}
}

// TestWebScreens walks the main screens at a phone's, a tablet's and a
// desktop's width and keeps screenshots of each (with -update, into
// docs/screenshots): the assistants' cards, a chat with a table, code, a
// diff and tool calls, the workspace's files and the terminal. On the way
// it checks what each screen promises: cards with names, descriptions and
// example prompts; Markdown tables, code and diffs styled; an edit shown
// as a diff and a command as a command; the CLI's .agentbox folder hidden
// until asked for; no sideways scrolling on a phone, whose sidebar and
// side panel slide over the chat.
func TestWebScreens(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	b.signIn(s)
	desktop := widths[2]

	// The cards: every assistant with its name, description and what runs
	// it; the chosen one's greeting and example prompts.
	b.waitFor(20*time.Second, "three cards", `document.querySelectorAll('[role=radiogroup][aria-label=Assistants] [role=radio]').length === 3`)
	b.waitText(5*time.Second, `.card[data-assistant="reviewer"] .card-desc`, "explains each change with a diff")
	b.waitText(5*time.Second, `.card[data-assistant="coder"] .card-runs`, "Claude Code · sandbox")
	b.waitText(5*time.Second, `.card[data-assistant="helper"] .card-runs`, "chat")
	b.waitText(5*time.Second, `.card[data-assistant="coder"] .tag`, "Files")
	b.click(`.card[data-assistant="reviewer"]`)
	b.waitFor(5*time.Second, "the reviewer chosen", `document.querySelector('.card[data-assistant="reviewer"]').getAttribute('aria-checked') === 'true'`)
	b.waitText(5*time.Second, ".greeting h2", "Which code shall I review?")
	for _, w := range widths {
		b.resize(w)
		b.noHorizontalScroll("the cards at " + w.name)
		b.shot("cards", w)
	}
	b.resize(desktop)

	// An example prompt fills the message box, to send.
	b.click(`.prompts .prompt`)
	b.waitFor(5*time.Second, "the prompt in the box", `document.querySelector('#message').value === 'Please review the greeting code'`)
	// What the turn waits for, as the page says it (every text its
	// progress line shows, recorded as it changes).
	eval[bool](b, `(() => {
		window.__progress = [];
		new MutationObserver(() => {
			const p = document.querySelector('.progress .what')?.textContent;
			if (p && window.__progress.at(-1) !== p) window.__progress.push(p);
		}).observe(document.body, {subtree: true, childList: true, characterData: true});
		return true;
	})()`)
	b.click(`button[aria-label="Send"]`)
	b.waitFor(60*time.Second, "the turn runs", `!!document.querySelector('button.stop')`)
	b.waitText(turnTimeout, ".msg.answer", "Here is what changed")
	b.waitFor(10*time.Second, "the turn ends", `!document.querySelector('button.stop')`)
	chatID := b.chatID()
	progress := eval[[]string](b, `window.__progress`)
	if got := strings.Join(progress, " | "); !strings.Contains(got, "Starting the sandbox (docker)…") || !strings.Contains(got, "Starting Claude Code…") {
		t.Errorf("the progress of the turn: %q, want the sandbox and Claude Code starting", got)
	}
	// The usage of a scripted model: its time and tokens, no cost.
	b.waitText(10*time.Second, ".usage", " in · ")
	if u := eval[string](b, `document.querySelector('.usage').textContent`); strings.Contains(u, "$") {
		t.Errorf("a scripted model's turn shows a cost: %q", u)
	}

	// The answer's Markdown: a table with a header row, a diff with its
	// lines marked, code highlighted, each block with its language.
	b.waitText(5*time.Second, ".md .table-wrap table th", "Before")
	b.waitFor(5*time.Second, "a table of 3 rows", `document.querySelectorAll('.md table tbody tr').length === 3`)
	b.waitFor(5*time.Second, "a diff block", `document.querySelectorAll('.md .code-block.diff .dl.add').length === 3 && document.querySelectorAll('.md .code-block.diff .dl.del').length === 2`)
	b.waitText(5*time.Second, ".md .code-block .lang", "python")
	b.waitFor(5*time.Second, "python highlighted", `!!document.querySelector('.md .code-block:not(.diff) .hljs-keyword')`)
	// Tool calls: the write as the file's code, the edit as a diff with
	// its counts, the command as a command with its output.
	b.waitText(5*time.Second, `details[data-tool="Write"] .target`, "app.py")
	b.waitText(5*time.Second, `details[data-tool="Edit"] .stat`, "+3")
	b.waitText(5*time.Second, `details[data-tool="Edit"] .stat`, "−2")
	b.waitText(5*time.Second, `details[data-tool="Bash"] .target`, "python3 app.py")
	b.click(`details[data-tool="Edit"] > summary`)
	b.click(`details[data-tool="Bash"] > summary`)
	b.waitText(5*time.Second, `details[data-tool="Edit"][open] .dl.add`, `f"Hello, {name}!"`)
	b.waitText(5*time.Second, `details[data-tool="Edit"][open] .dl.del`, `return "Hello " + name`)
	b.waitText(5*time.Second, `details[data-tool="Bash"][open] .console .cmd`, "python3 app.py")
	b.waitText(5*time.Second, `details[data-tool="Bash"][open] .console .out`, "Hello, world!")
	if b.exists(`details.tool[open] .fields`) || strings.Contains(eval[string](b, `document.querySelector('.thread').innerText`), `\n`) {
		t.Error("a tool call shows raw JSON arguments")
	}
	for _, w := range widths {
		b.resize(w)
		b.noHorizontalScroll("the chat at " + w.name)
		if w.name != "desktop" && b.exists(".app.side-open") {
			t.Errorf("at %s the side panel covers the chat", w.name)
		}
		eval[bool](b, `(document.querySelector('details[data-tool="Edit"]').scrollIntoView({block: "start"}), true)`)
		b.shot("chat", w)
	}
	// The same in the dark.
	b.scheme("dark")
	b.shot("chat-dark", widths[2])
	b.scheme("light")

	// A phone: the sidebar slides in from the menu button and goes when a
	// chat is chosen; the message box stays in view.
	phone := widths[0]
	b.resize(phone)
	if eval[bool](b, `getComputedStyle(document.querySelector('.sidebar')).visibility === 'visible'`) {
		t.Error("the sidebar shows on a phone before it is opened")
	}
	b.click(`button[aria-label="Open the sidebar"]`)
	b.waitFor(5*time.Second, "the sidebar open", `getComputedStyle(document.querySelector('.sidebar')).visibility === 'visible'`)
	b.run(5*time.Second, "settle", chromedp.Sleep(300*time.Millisecond))
	b.shot("sidebar", phone)
	b.click(`.chats li.current .open`)
	b.waitFor(5*time.Second, "the sidebar closed", `!document.querySelector('.app.nav-open')`)
	b.waitFor(5*time.Second, "the message box in view", `(() => { const r = document.querySelector('#message').getBoundingClientRect(); return r.bottom <= window.innerHeight && r.top > window.innerHeight / 2 && r.width > 250; })()`)

	// Files: the side panel (over the chat below a laptop's width) lists
	// what the agent wrote, without the CLI's .agentbox folder until
	// hidden files are asked for.
	for _, w := range widths {
		b.resize(w)
		if !b.exists(".app.side-open") {
			b.click(`button[aria-label="Workspace and terminal"]`)
		}
		b.click(`#tab-files`)
		b.waitText(30*time.Second, `[role="tree"] .fname`, "app.py")
		if w.name == "desktop" {
			if b.exists(`[role="tree"] button[data-name=".agentbox"]`) || strings.Contains(eval[string](b, `document.querySelector('[role=tree]').textContent`), ".agentbox") {
				t.Error("the workspace tree shows .agentbox")
			}
			b.click(`button[aria-label="Show hidden files"]`)
			b.waitText(10*time.Second, `[role="tree"] .fname`, ".agentbox")
			b.click(`button[aria-label="Show hidden files"]`)
			b.waitFor(10*time.Second, ".agentbox hidden again", `!document.querySelector('[role=tree]').textContent.includes('.agentbox')`)
		}
		if !b.exists(".viewer") {
			b.run(10*time.Second, "open app.py", chromedp.Click(chromedp.Search(`//ul[@role="tree"]//button[.//span[@class="fname" and text()="app.py"]]`)))
		}
		b.waitText(10*time.Second, ".viewer pre.code", "def greet")
		b.run(5*time.Second, "settle", chromedp.Sleep(300*time.Millisecond))
		b.shot("files", w)
	}

	// The terminal: a shell in a sandbox of the chat runs the program.
	b.resize(desktop)
	b.openTerminal()
	b.terminalRun("python3 app.py")
	b.waitText(30*time.Second, ".xterm-rows", "Hello, world!")
	if got := eval[string](b, `getComputedStyle(document.querySelector('.terminal .status')).textTransform`); got != "none" {
		t.Errorf("the terminal's status line is text-transform: %s", got)
	}
	for _, w := range widths {
		b.resize(w)
		if !b.exists(".app.side-open") {
			b.click(`button[aria-label="Workspace and terminal"]`)
		}
		b.run(5*time.Second, "settle", chromedp.Sleep(500*time.Millisecond))
		b.shot("terminal", w)
	}
	b.resize(desktop)
	b.click(`button[aria-label="Close the terminal"]`)
	b.waitText(30*time.Second, ".terminal .status", "sandbox is removed")
	e2etest.NoContainers(t, chatID, 30*time.Second)
	b.click(`#tab-files`)
}

// scheme makes the page see the system's colour scheme as "dark" or
// "light".
func (b *browser) scheme(s string) {
	b.t.Helper()
	b.run(10*time.Second, "colour scheme "+s, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}}})
		return err
	}))
}
