package vision

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// pngOf is a w x h PNG.
func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dataURL(mt string, b []byte) string {
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func TestParse(t *testing.T) {
	t.Parallel()
	small := pngOf(t, 20, 10)
	im, err := Parse(dataURL("image/png", small))
	if err != nil || im.MediaType != "image/png" || im.Width != 20 || im.Height != 10 || !bytes.Equal(im.Data, small) {
		t.Fatalf("Parse = %+v, %v", im, err)
	}
	// The bytes decide the type, whatever the URL says.
	if im, err := Parse(dataURL("image/jpeg", small)); err != nil || im.MediaType != "image/png" || im.Ext() != ".png" {
		t.Errorf("a PNG called JPEG: %+v, %v", im, err)
	}
	if got := im.DataURL(); got != dataURL("image/png", small) {
		t.Errorf("DataURL = %.40s", got)
	}
	for _, tt := range []struct {
		url  string
		want error
		msg  string
	}{
		{"https://example.com/a.png", ErrNotImage, "want a data: URL"},
		{"data:image/png," + base64.StdEncoding.EncodeToString(small), ErrNotImage, ";base64"},
		{"data:image/png;base64,%%%", ErrNotImage, "does not decode"},
		{dataURL("text/plain", []byte("hello")), ErrNotImage, "want PNG, JPEG, GIF or WebP"},
		{dataURL("image/png", make([]byte, MaxBytes+10)), ErrTooLarge, "at most"},
	} {
		_, err := Parse(tt.url)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Parse(%.40s) = %v, want %v with %q", tt.url, err, tt.want, tt.msg)
		}
	}
}

func TestFit(t *testing.T) {
	t.Parallel()
	im, err := Decode(pngOf(t, 2400, 600))
	if err != nil {
		t.Fatal(err)
	}
	fit, err := Fit(im, MaxSide)
	if err != nil || fit.Width != 1080 || fit.Height != 270 || fit.MediaType != "image/png" {
		t.Fatalf("Fit = %dx%d %s, %v", fit.Width, fit.Height, fit.MediaType, err)
	}
	if back, err := Decode(fit.Data); err != nil || back.Width != 1080 || back.Height != 270 {
		t.Errorf("the fitted image decodes as %+v, %v", back, err)
	}
	// A JPEG stays a JPEG; one that fits is returned as it is.
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, 500, 1500)), nil); err != nil {
		t.Fatal(err)
	}
	j, _ := Decode(buf.Bytes())
	if fit, err := Fit(j, MaxSide); err != nil || fit.MediaType != "image/jpeg" || fit.Width != 360 || fit.Height != 1080 {
		t.Errorf("Fit of a JPEG = %+v, %v", fit.MediaType, err)
	}
	small, _ := Decode(pngOf(t, 100, 100))
	if fit, _ := Fit(small, MaxSide); !bytes.Equal(fit.Data, small.Data) {
		t.Error("an image that fits was encoded again")
	}
}

// TestForCLI: the images of the last user message, fitted, at most
// MaxPerMessage.
func TestForCLI(t *testing.T) {
	t.Parallel()
	big := dataURL("image/png", pngOf(t, 2000, 100))
	parts := []chat.Part{{Type: chat.PartText, Text: "look"}}
	for range MaxPerMessage + 2 {
		parts = append(parts, chat.Part{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: big}})
	}
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "old", Parts: []chat.Part{{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: dataURL("image/png", pngOf(t, 5, 5))}}}},
		{Role: chat.RoleAssistant, Content: "ok"},
		{Role: chat.RoleUser, Content: "look", Parts: parts},
	}
	got, err := ForCLI(msgs)
	if err != nil || len(got) != MaxPerMessage || got[0].Width != 1080 || got[0].Height != 54 {
		t.Fatalf("ForCLI = %d images (%v), first %+v", len(got), err, got)
	}
	if got, err := ForCLI(msgs[:2]); err != nil || len(got) != 1 || got[0].Width != 5 {
		t.Errorf("the last user message's image: %+v, %v", got, err)
	}
}

func TestFetch(t *testing.T) {
	t.Parallel()
	img := pngOf(t, 30, 30)
	mux := http.NewServeMux()
	mux.HandleFunc("/a.png", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(img) })
	mux.HandleFunc("/missing.png", http.NotFound)
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.example/a.png", http.StatusFound)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(make([]byte, MaxBytes+1)) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := context.Background()

	f := &Fetcher{Allowed: []string{"127.0.0.1", "*.example.org"}}
	if im, err := f.Fetch(ctx, srv.URL+"/a.png"); err != nil || im.Width != 30 || !bytes.Equal(im.Data, img) {
		t.Fatalf("Fetch = %+v, %v", im.Width, err)
	}
	for _, tt := range []struct {
		f    *Fetcher
		url  string
		want error
		msg  string
	}{
		{f, "ftp://127.0.0.1/a.png", ErrNotImage, "not an http(s) address"},
		{f, "http://user:pw@127.0.0.1/a.png", ErrNotImage, "credentials"},
		{f, "https://evil.example/a.png", ErrHostNotAllowed, "images.allowed_hosts"},
		{f, srv.URL + "/missing.png", nil, "HTTP 404"},
		{f, srv.URL + "/away", ErrHostNotAllowed, "a redirect to elsewhere.example"},
		{f, srv.URL + "/huge", ErrTooLarge, "over"},
		// A name allowed, that leads into this host's own network: refused
		// unless the address itself is allowed.
		{&Fetcher{Allowed: []string{"localhost"}}, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/a.png", ErrHostNotAllowed, "an address of this server's own networks"},
		{&Fetcher{}, srv.URL + "/a.png", ErrHostNotAllowed, "127.0.0.1"},
	} {
		_, err := tt.f.Fetch(ctx, tt.url)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Fetch(%s) = %v, want %v with %q", tt.url, err, tt.want, tt.msg)
		}
	}
	if !f.Allows("cdn.example.org") || f.Allows("example.org") || !f.Allows("CDN.Example.Org.") {
		t.Error("Allows: *.example.org")
	}
}
