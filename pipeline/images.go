package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/vision"
)

// fetchImages makes every image of the request's messages a data: URL
// (resolveImages); what is wrong is the client's error.
func (t *turn) fetchImages(ctx context.Context, app *assistant.App) error {
	return resolveImages(ctx, app, t.req.Messages, "messages", chat.ErrInvalidRequest)
}

// resolveImages makes every image of msgs a data: URL, in place: an
// http(s) address is fetched from a host app.jsonc's images.allowed_hosts
// allows (vision.Fetcher), a data: URL is checked. An error names the
// message and part under where ("messages"), with code for what is wrong
// with an image (the client's, or a hook's); a host that does not answer
// with an image is chat.ErrUpstream.
func resolveImages(ctx context.Context, app *assistant.App, msgs []chat.Message, where string, code string) error {
	var f *vision.Fetcher
	for i := range msgs {
		m := &msgs[i]
		if len(m.Images()) == 0 {
			continue
		}
		if m.Role != chat.RoleUser {
			return chat.Errorf(code, "%s[%d]: images go in user messages only", where, i)
		}
		parts := make([]chat.Part, len(m.Parts))
		copy(parts, m.Parts)
		n := 0
		for j, p := range parts {
			if p.Type != chat.PartImage || p.ImageURL == nil {
				continue
			}
			if n++; n > vision.MaxPerMessage {
				return chat.Errorf(code, "%s[%d]: more than %d images in one message", where, i, vision.MaxPerMessage)
			}
			at := fmt.Sprintf("%s[%d].content[%d].image_url", where, i, j)
			var im vision.Image
			var err error
			switch u := p.ImageURL.URL; {
			case strings.HasPrefix(u, "data:"):
				im, err = vision.Parse(u)
			case strings.HasPrefix(u, "https://"), strings.HasPrefix(u, "http://"):
				if f == nil {
					f = &vision.Fetcher{Allowed: app.Config.Images.AllowedHosts}
				}
				im, err = f.Fetch(ctx, u)
			default:
				err = fmt.Errorf("%w: want a data: URL (data:image/png;base64,...) or an http(s) address", vision.ErrNotImage)
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				c := code
				if !errors.Is(err, vision.ErrNotImage) && !errors.Is(err, vision.ErrTooLarge) && !errors.Is(err, vision.ErrHostNotAllowed) {
					// The address was fine; its host did not answer with it.
					c = chat.ErrUpstream
				}
				return chat.Errorf(c, "%s: %v", at, err)
			}
			parts[j].ImageURL = &chat.ImageURL{URL: im.DataURL(), Detail: p.ImageURL.Detail}
		}
		m.Parts = parts
	}
	return nil
}

// hasImages reports whether any of msgs has an image.
func hasImages(msgs []chat.Message) bool {
	for _, m := range msgs {
		if len(m.Images()) > 0 {
			return true
		}
	}
	return false
}

// checkVision refuses images of the turn's input for a model that cannot
// take them (its connector's capabilities have no vision), naming what to
// change.
func (t *turn) checkVision(msgs []chat.Message, model string, caps connector.Capabilities) error {
	if caps.HasVision() || !hasImages(msgs) {
		return nil
	}
	return chat.Errorf(chat.ErrInvalidRequest, "assistant %q answers with model %q of connector %s, which does not take images "+
		"(its capabilities have no vision): send text only, or use a model that takes images (the connector's capabilities.vision)",
		t.asst.ID, model, t.connID)
}

// AttachmentsDir is the workspace folder of the images a CLI gets as files
// (Yao's runners: .attachments/<chat>/).
const AttachmentsDir = ".attachments"

// attachImages writes the images of the turn's input into the workspace
// (AttachmentsDir/<chat>/image-<hash of its bytes>.<ext>, as they came:
// a later turn's images never replace an earlier one's) and returns the
// input with each such message's text naming them where the images were,
// as Yao's runners give a CLI its attachments ("[Attached file: path
// (type, size)]"), and the files' paths. The parts stay, for a CLI that
// takes images inline.
func attachImages(ctx context.Context, ws *sandbox.Workspace, chatID string, input []chat.Message) ([]chat.Message, []string, error) {
	if !hasImages(input) {
		return input, nil, nil
	}
	var paths []string
	out := make([]chat.Message, len(input))
	copy(out, input)
	for i, m := range out {
		if len(m.Images()) == 0 {
			continue
		}
		var texts []string
		for _, p := range m.Parts {
			if p.Type != chat.PartImage {
				if p.Text != "" {
					texts = append(texts, p.Text)
				}
				continue
			}
			im, err := vision.Parse(p.ImageURL.URL)
			if err != nil {
				return nil, nil, badRequest("messages: an image: %v", err)
			}
			sum := sha256.Sum256(im.Data)
			rel := fmt.Sprintf("%s/%s/image-%s%s", AttachmentsDir, chatID, hex.EncodeToString(sum[:6]), im.Ext())
			if err := ws.WriteFile(ctx, rel, im.Data, 0o644); err != nil {
				return nil, nil, &chat.Error{Code: chat.ErrSandbox, Message: "write an attached image into the workspace: " + err.Error(), Err: err}
			}
			paths = append(paths, rel)
			texts = append(texts, fmt.Sprintf("[Attached file: %s (%s, %s)]", rel, im.MediaType, fileSize(len(im.Data))))
		}
		out[i].Content = strings.Join(texts, "\n\n")
	}
	return out, paths, nil
}

// fileSize is a size as Yao's runners write it (12.3KB).
func fileSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// withoutImages is msgs with each message's images as "[image]" where
// they were, in its text: the earlier turns as a CLI gets them (in its
// prompt, or its session has them) and as a model without vision gets
// them (it knows one was sent; Yao writes "[Image content not supported
// by this model]" in their place).
func withoutImages(msgs []chat.Message) []chat.Message {
	if !hasImages(msgs) {
		return msgs
	}
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if len(m.Images()) == 0 {
			continue
		}
		var texts []string
		for _, p := range m.Parts {
			switch {
			case p.Type == chat.PartImage:
				texts = append(texts, "[image]")
			case p.Text != "":
				texts = append(texts, p.Text)
			}
		}
		out[i].Content, out[i].Parts = strings.Join(texts, "\n"), nil
	}
	return out
}
