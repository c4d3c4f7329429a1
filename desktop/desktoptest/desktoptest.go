// Package desktoptest holds what the desktop's tests share: a page whose
// look on the screen is known, and the check that a screenshot shows it.
package desktoptest

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// Page is a page whose window is orange on its left half and blue on its
// right half, titled Title. It adds the input it gets to its title: "
// key:K" for each key pressed, " click" for each mouse button pressed.
const Page = `<!doctype html><title>` + Title + `</title><body style="margin:0"><div style="position:fixed;inset:0 50% 0 0;background:#ff8c00"></div><div style="position:fixed;inset:0 0 0 50%;background:#1e50ff"></div>` +
	`<script>addEventListener("keydown", e => document.title += " key:" + e.key); addEventListener("mousedown", () => document.title += " click")</script></body>`

// Title is Page's title.
const Title = "desktop test page"

// The colours of Page's halves.
var (
	Orange = [3]int{0xff, 0x8c, 0x00}
	Blue   = [3]int{0x1e, 0x50, 0xff}
)

// ServeScript is a shell script that writes Page to site/index.html in the
// working folder, serves it on 127.0.0.1:PORT in the background and waits
// until it answers.
func ServeScript(port string) string {
	return "mkdir -p site && printf '%s' '" + Page + "' > site/index.html && " +
		"(cd site && nohup python3 -m http.server " + port + " --bind 127.0.0.1 >/dev/null 2>&1 &) && " +
		"for i in $(seq 300); do curl -sf http://127.0.0.1:" + port + "/ >/dev/null && exit 0; sleep 0.1; done; exit 1"
}

// Share is the fraction of the pixels in r (every 4th in each direction)
// within 24 of c in each channel.
func Share(img image.Image, r image.Rectangle, c [3]int) float64 {
	var n, hit int
	near := func(v uint32, want int) bool { d := int(v>>8) - want; return d >= -24 && d <= 24 }
	for y := r.Min.Y; y < r.Max.Y; y += 4 {
		for x := r.Min.X; x < r.Max.X; x += 4 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			n++
			if near(cr, c[0]) && near(cg, c[1]) && near(cb, c[2]) {
				hit++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(hit) / float64(n)
}

// Halves are the parts of a screen of img's size where Page's halves show
// in a maximized browser window: below its tab strip and address bar,
// clear of the middle and the edges.
func Halves(b image.Rectangle) (left, right image.Rectangle) {
	w, h := b.Dx(), b.Dy()
	top, bottom := h*2/5, h-h/20
	return image.Rect(w/25, top, w/2-w/25, bottom), image.Rect(w/2+w/25, top, w-w/25, bottom)
}

// Decode decodes a PNG.
func Decode(t testing.TB, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG (%d bytes): %v", len(b), err)
	}
	return img
}

// ShowsPage fails t unless img shows Page: 90% of each half's pixels in
// its colour. On failure the image is kept under .cache/artifacts/desktop.
func ShowsPage(t testing.TB, img image.Image) {
	t.Helper()
	left, right := Halves(img.Bounds())
	ok := true
	if s := Share(img, left, Orange); s < 0.9 {
		t.Errorf("the page's left half is %.0f%% orange on the screen, want 90%% or more", s*100)
		ok = false
	}
	if s := Share(img, right, Blue); s < 0.9 {
		t.Errorf("the page's right half is %.0f%% blue on the screen, want 90%% or more", s*100)
		ok = false
	}
	if !ok {
		Keep(t, "screen.png", img)
	}
}

// Keep saves img under .cache/artifacts/desktop and logs its path.
func Keep(t testing.TB, name string, img image.Image) {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), ".cache", "artifacts", "desktop")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("screenshot not kept: %v", err)
		return
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Logf("screenshot not kept: %v", err)
		return
	}
	t.Logf("screenshot kept: %s", p)
}
