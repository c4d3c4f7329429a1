package claude

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// TestInputImages: with a model that takes images, the last user
// message's images follow the text as base64 image blocks, a large one
// resized to 1080 pixels as Yao's Claude runner sends it; without, the
// input is the text alone (which names the images' files).
func TestInputImages(t *testing.T) {
	t.Parallel()
	var big bytes.Buffer
	if err := png.Encode(&big, image.NewRGBA(image.Rect(0, 0, 2160, 540))); err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(big.Bytes())
	in := []chat.Message{{Role: chat.RoleUser, Content: "Look\n\n[Attached file: .attachments/c/image-1.png (image/png, 3.0KB)]",
		Parts: []chat.Part{{Type: chat.PartText, Text: "Look"}, {Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: url}}}}}

	line, err := inputLines(in, true)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Type    string
		Message struct {
			Content []struct {
				Type, Text string
				Source     struct {
					Type      string
					MediaType string `json:"media_type"`
					Data      string
				}
			}
		}
	}
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Message.Content
	if got.Type != "user" || len(c) != 2 || c[0].Type != "text" || !strings.HasPrefix(c[0].Text, "Look\n\n[Attached file:") || c[1].Type != "image" || c[1].Source.Type != "base64" {
		t.Fatalf("line = %s", line)
	}
	data, _ := base64.StdEncoding.DecodeString(c[1].Source.Data)
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width != 1080 || cfg.Height != 270 || c[1].Source.MediaType != "image/png" {
		t.Errorf("image block: %dx%d %q %v", cfg.Width, cfg.Height, c[1].Source.MediaType, err)
	}

	line, err = inputLines(in, false)
	if err != nil || strings.Contains(string(line), `"image"`) || !strings.Contains(string(line), `"content":"Look\n\n[Attached file:`) {
		t.Errorf("without vision: %s %v", line, err)
	}
}

// TestImageInputCLI: Claude Code sends the image blocks of its stream-json
// input on to the model, every supported version.
func TestImageInputCLI(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "A black rectangle."}}})
		t.Cleanup(srv.Close)
		var img bytes.Buffer
		if err := png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 8, 4))); err != nil {
			t.Fatal(err)
		}
		log := &chattest.Recorder{}
		req := newRequest(sb, srv, "chat-image", "What is in the picture?", log)
		req.Input[0].Parts = []chat.Part{{Type: chat.PartText, Text: "What is in the picture?"},
			{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(img.Bytes())}}}
		req.Vision = true
		res, err := New(Options{Binary: cli.Bin}).Run(context.Background(), req)
		if err != nil || res.Content != "A black rectangle." {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		var found bool
		for _, r := range srv.TurnRequests() {
			found = found || bytes.Contains(r.Body, []byte(`"media_type":"image/png","data":"`+base64.StdEncoding.EncodeToString(img.Bytes())+`"`))
		}
		if !found {
			t.Errorf("no request to the model carried the image block")
		}
	})
}
