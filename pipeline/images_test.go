package pipeline

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
)

// pngBytes is a w x h PNG.
func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pngURL(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

// withImages is a user message with text and images (image_url parts).
func withImages(text string, urls ...string) []chat.Message {
	m := chat.Message{Role: chat.RoleUser, Content: text, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
	for _, u := range urls {
		m.Parts = append(m.Parts, chat.Part{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: u}})
	}
	return []chat.Message{m}
}

// TestImagesDirect: a direct assistant's vision model gets the images as
// image_url parts, an address fetched from an allowed host as a data:
// URL; the history keeps "[image]" in their place. An address of a host
// the app does not allow, and a model without vision, are clear errors.
func TestImagesDirect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "A red square."}, {Text: "Still red."}, {Text: "Red, I recall."}}}, "")
	small, served := pngBytes(t, 4, 4), pngBytes(t, 6, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(served) }))
	t.Cleanup(srv.Close)
	e.app.Config.Images.AllowedHosts = []string{"127.0.0.1"}
	ctx := context.Background()

	msgs := withImages("What is this?", pngURL(small), srv.URL+"/b.png")
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(e.llm.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	last := body.Messages[len(body.Messages)-1]
	want := `[{"text":"What is this?","type":"text"},{"image_url":{"url":"` + pngURL(small) + `"},"type":"image_url"},` +
		`{"image_url":{"url":"` + pngURL(served) + `"},"type":"image_url"}]`
	if string(last.Content) != want {
		t.Errorf("content = %s\nwant %s", last.Content, want)
	}
	// The history keeps the images (a fetched one as its data: URL), and
	// the follow-up sends them again, as Yao sends its history.
	hist, err := e.p.cfg.History.History(ctx, "u1", "c1")
	if err != nil || len(hist) != 2 || len(hist[0].Images()) != 2 || hist[0].Images()[1].URL != pngURL(served) || hist[0].Content != "What is this?" {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("And now?")}, nil); err != nil {
		t.Fatal(err)
	}
	if b := string(e.llm.Requests()[1].Body); !strings.Contains(b, want) {
		t.Errorf("follow-up request: %s", b)
	}

	for _, tc := range []struct {
		name string
		mod  func()
		msgs []chat.Message
		want string
	}{
		{"host not allowed", nil, withImages("x", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/b.png"),
			"messages[0].content[1].image_url: host not allowed: localhost (the hosts images may come from are app.jsonc's images.allowed_hosts)"},
		{"not an image", nil, withImages("x", "data:image/png;base64,aGVsbG8="), "messages[0].content[1].image_url: not an image"},
		{"no vision", func() { e.app.Connectors["test.llm"].Options.Capabilities = map[string]any{"tool_calls": true} }, withImages("x", pngURL(small)),
			`assistant "qa" answers with model "m1" of connector test.llm, which does not take images`},
	} {
		if tc.mod != nil {
			tc.mod()
		}
		_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c-" + strings.ReplaceAll(tc.name, " ", "-"), AssistantID: "qa", Messages: tc.msgs}, nil)
		if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrInvalidRequest || !strings.Contains(ce.Message, tc.want) {
			t.Errorf("%s: %v, want invalid_request with %q", tc.name, err, tc.want)
		}
	}
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2 (none for the refused turns)", n)
	}
	// A model without vision gets the earlier turns' images as "[image]";
	// only the new message's images are refused.
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "qa", Messages: user("Text only now")}, nil); err != nil {
		t.Fatal(err)
	}
	if b := string(e.llm.Requests()[2].Body); !strings.Contains(b, `"content":"What is this?\n[image]\n[image]"`) || strings.Contains(b, "base64") {
		t.Errorf("request without vision: %s", b)
	}
}

// TestImagesSandboxed: a sandboxed CLI gets the input's images as files in
// the workspace (.attachments/<chat>/), named in the input's text as Yao's
// runners name them, with the parts kept and Vision set for a model that
// takes images.
func TestImagesSandboxed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &scripted.Script{}, "")
	img := pngBytes(t, 5, 5)
	if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: withImages("Fix the layout", pngURL(img))}, nil); err != nil {
		t.Fatal(err)
	}
	req := e.ex.reqs[0]
	in := req.Input[len(req.Input)-1]
	m := regexp.MustCompile(`^Fix the layout\n\n\[Attached file: (\.attachments/c1/image-[0-9a-f]{12}\.png) \(image/png, (\d+)B\)\]$`).FindStringSubmatch(in.Content)
	if m == nil || len(in.Images()) != 1 || !req.Vision || len(req.Images) != 1 || req.Images[0] != m[1] {
		t.Fatalf("input = %q, images %d %q, vision %v", in.Content, len(in.Images()), req.Images, req.Vision)
	}
	dir, err := e.p.cfg.Workspaces.Path("u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, m[1]))
	if err != nil || !bytes.Equal(got, img) {
		t.Errorf("attached file: %v", err)
	}
}

// TestImagesCreateHook: Create sees a message's images as Yao gives them
// (content parts), and the images it returns are taken as a client's:
// checked (a broken one is the hook's error) and passed on.
func TestImagesCreateHook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &scripted.Script{}, `export function Create(ctx, messages) {
	const m = messages[messages.length - 1];
	if (!Array.isArray(m.content) || m.content[1].type !== "image_url" || !m.content[1].image_url.url.startsWith("data:image/png;base64,")) {
		throw new Error("content: " + JSON.stringify(m.content));
	}
	if (m.content[0].text === "bad") {
		return {messages: [{role: "user", content: [{type: "text", text: "x"}, {type: "image_url", image_url: {url: "data:image/png;base64,aGVsbG8="}}]}]};
	}
	m.content.push({type: "image_url", image_url: {url: m.content[1].image_url.url, detail: "low"}});
	return {messages};
}
`)
	img := pngURL(pngBytes(t, 5, 5))
	ctx := context.Background()
	if _, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "coder", Messages: withImages("Two of them", img)}, nil); err != nil {
		t.Fatal(err)
	}
	in := e.ex.reqs[0].Input
	if ims := in[len(in)-1].Images(); len(ims) != 2 || ims[1].URL != img || ims[1].Detail != "low" {
		t.Errorf("the CLI's input images: %+v", ims)
	}
	_, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c2", AssistantID: "coder", Messages: withImages("bad", img)}, nil)
	if ce := chat.AsError(err); err == nil || ce.Code != chat.ErrHook || !strings.Contains(ce.Message, "Create hook returned messages[0].content[1].image_url: not an image") {
		t.Errorf("a broken image from Create: %v", err)
	}
}
