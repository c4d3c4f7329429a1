package server

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
)

// tinyPNG is a 3 x 2 PNG as a data: URL.
func tinyPNG(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestImageParts: a user message's images reach the pipeline as parts, in
// order with its text, from the chat completions API, the Responses API
// and the native API (as the web app sends them); a data: URL's media type
// is what its bytes say, an http(s) address goes on to be fetched.
func TestImageParts(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	img := tinyPNG(t)
	// Claimed as JPEG: the bytes are PNG.
	wrong := "data:image/jpeg" + img[len("data:image/png"):]
	for _, tc := range []struct{ name, path, body string }{
		{"chat completions", "/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},` +
			`{"type":"image_url","image_url":{"url":"` + wrong + `","detail":"low"}},{"type":"image_url","image_url":"https://cdn.example.com/b.png"}]}]}`},
		{"responses", "/v1/responses", `{"model":"qa","input":[{"role":"user","content":[{"type":"input_text","text":"What is this?"},` +
			`{"type":"input_image","image_url":"` + wrong + `","detail":"low"},{"type":"input_image","image_url":"https://cdn.example.com/b.png"}]}]}`},
		{"native", "/api/assistants/qa/chat", `{"message":{"role":"user","content":[{"type":"text","text":"What is this?"},` +
			`{"type":"image_url","image_url":{"url":"` + wrong + `","detail":"low"}},{"type":"image_url","image_url":{"url":"https://cdn.example.com/b.png"}}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := do(t, ts, "POST", tc.path, tokenAlice, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			msgs := fb.lastCall(t).Messages
			m := msgs[len(msgs)-1]
			want := []chat.Part{
				{Type: chat.PartText, Text: "What is this?"},
				{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: img, Detail: "low"}},
				{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: "https://cdn.example.com/b.png"}},
			}
			if m.Content != "What is this?" || len(m.Parts) != len(want) {
				t.Fatalf("message = %+v", m)
			}
			for i, p := range want {
				g := m.Parts[i]
				if g.Type != p.Type || g.Text != p.Text || (p.ImageURL != nil && (g.ImageURL == nil || *g.ImageURL != *p.ImageURL)) {
					t.Errorf("part %d = %+v %+v, want %+v %+v", i, g, g.ImageURL, p, p.ImageURL)
				}
			}
		})
	}
	// An image alone is a message; text alone has no parts.
	resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"`+img+`"}}]}]}`)
	if m := fb.lastCall(t).Messages[0]; resp.StatusCode != 200 || m.Content != "" || len(m.Images()) != 1 {
		t.Errorf("image alone: %d %s %+v", resp.StatusCode, out, m)
	}
	do(t, ts, "POST", "/v1/chat/completions", tokenAlice, `{"model":"qa","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`)
	if m := fb.lastCall(t).Messages[0]; m.Content != "a\nb" || m.Parts != nil {
		t.Errorf("text parts: %+v", m)
	}
}

// TestImageBodyLimit: a message with images as large as a message may
// carry fits the default body limit (app.jsonc limits.request_body); a
// body over the app's limit is a 413 that says the limit and the setting
// that raises it.
func TestImageBodyLimit(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	ts := startServer(t, fb, nil)
	// Noise does not compress: a PNG of vision.MaxBytes' order.
	side := 1600
	im := image.NewRGBA(image.Rect(0, 0, side, side))
	_, _ = rand.NewChaCha8([32]byte{1}).Read(im.Pix)
	var buf bytes.Buffer
	if err := png.Encode(&buf, im); err != nil {
		t.Fatal(err)
	}
	big := "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
	body := `{"model":"qa","messages":[{"role":"user","content":[{"type":"text","text":"two"},` +
		`{"type":"image_url","image_url":{"url":"` + big + `"}},{"type":"image_url","image_url":{"url":"` + big + `"}}]}]}`
	if resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, body); resp.StatusCode != 200 {
		t.Fatalf("two images of %d bytes: %d %.300s", buf.Len(), resp.StatusCode, out)
	}

	fb.app.Config.Limits = assistant.Limits{RequestBody: 1 << 20}
	resp, out := do(t, ts, "POST", "/v1/chat/completions", tokenAlice, body)
	want := `is over the limit of 1.0 MB (1048576 bytes); images count as base64, 4/3 of their size: send fewer or smaller images, or raise app.jsonc's limits.request_body`
	if resp.StatusCode != 413 || !strings.Contains(string(out), want) || !strings.Contains(string(out), `"code":"body_too_large"`) {
		t.Errorf("over the app's limit: %d %.400s, want 413 with %q", resp.StatusCode, out, want)
	}
}
