package web

import (
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestWebChatting: what a user does around the answers, with the helper
// (a direct assistant, no sandbox): the keyboard shortcuts and their
// list, an image attached to a message, a chat whose first turn failed
// (titled by its message, its error in its history after a reload), and
// the Skills view listing the assistants' own skills.
func TestWebChatting(t *testing.T) {
	s := startServer(t)
	b := newBrowser(t)
	b.signIn(s)
	step := b.stepper(t)
	selected := func() string {
		return eval[string](b, `document.querySelector('[role=radiogroup] [aria-checked=true]')?.dataset.assistant ?? ""`)
	}

	step("Shortcuts", func(t *testing.T) {
		b.waitFor(20*time.Second, "the cards", `!!document.querySelector('[role=radiogroup] [aria-checked=true]')`)
		// "?" lists the shortcuts; Escape closes the list.
		b.run(5*time.Second, "press ?", chromedp.KeyEvent("?"))
		b.waitFor(5*time.Second, "the shortcuts dialog", `!!document.querySelector('[role=dialog][aria-labelledby=shortcuts-title]')`)
		text := eval[string](b, `document.querySelector('[role=dialog]').innerText`)
		for _, want := range []string{"Send the message", "New chat", "Stop the running turn", "Focus the message box", "Next assistant", "Show these shortcuts"} {
			if !strings.Contains(text, want) {
				t.Errorf("the shortcuts list lacks %q:\n%s", want, text)
			}
		}
		b.shot("shortcuts", widths[2])
		b.run(5*time.Second, "press Escape", chromedp.KeyEvent(kb.Escape))
		b.waitFor(5*time.Second, "the dialog closed", `!document.querySelector('[role=dialog]')`)

		// Alt+Down and Alt+Up choose the next and previous assistant.
		first := selected()
		b.run(5*time.Second, "Alt+Down", chromedp.KeyEvent(kb.ArrowDown, chromedp.KeyModifiers(chromedp.ModifierAlt)))
		b.waitFor(5*time.Second, "another assistant", `document.querySelector('[role=radiogroup] [aria-checked=true]').dataset.assistant !== `+jsString(first))
		b.run(5*time.Second, "Alt+Up", chromedp.KeyEvent(kb.ArrowUp, chromedp.KeyModifiers(chromedp.ModifierAlt)))
		b.waitFor(5*time.Second, "the first assistant again", `document.querySelector('[role=radiogroup] [aria-checked=true]').dataset.assistant === `+jsString(first))

		// Shift+Escape focuses the message box.
		b.run(5*time.Second, "focus elsewhere", chromedp.Focus(chromedp.CSS(`.new-chat`)))
		b.run(5*time.Second, "Shift+Escape", chromedp.KeyEvent(kb.Escape, chromedp.KeyModifiers(chromedp.ModifierShift)))
		b.waitFor(5*time.Second, "the message box focused", `document.activeElement?.id === 'message'`)
	})

	step("ImageAttach", func(t *testing.T) {
		// The helper's card; an image attached with the button's picker.
		b.click(`.card[data-assistant="helper"]`)
		img := filepath.Join(t.TempDir(), "dots.png")
		writePNG(t, img)
		b.run(10*time.Second, "attach an image", chromedp.SetUploadFiles(chromedp.CSS(`#attach-input`), []string{img}))
		b.waitFor(10*time.Second, "its thumbnail", `!!document.querySelector('.attachments img[src^="data:image/png;base64,"]')`)
		// The message goes out with OpenAI-style content parts: its text and
		// the image as a data: URL.
		eval[bool](b, `(() => {
			window.__sent = [];
			const f = window.fetch;
			window.fetch = function (u, init) {
				if (String(u).endsWith("/chat") && init && typeof init.body === "string") window.__sent.push(init.body);
				return f.apply(this, arguments);
			};
			return true;
		})()`)
		b.run(10*time.Second, "send with the image",
			chromedp.SendKeys(chromedp.CSS(`#message`), "What is in this picture?"),
			chromedp.SendKeys(chromedp.CSS(`#message`), "\r"))
		b.waitFor(turnTimeout, "an answer or an error", `!!document.querySelector('.turn .msg.answer, .turn .msg.error')`)
		var body struct {
			Message struct {
				Role    string `json:"role"`
				Content []struct {
					Type     string `json:"type"`
					Text     string `json:"text"`
					ImageURL struct {
						URL string `json:"url"`
					} `json:"image_url"`
				} `json:"content"`
			} `json:"message"`
		}
		sent := eval[string](b, `window.__sent[0] ?? ""`)
		if err := json.Unmarshal([]byte(sent), &body); err != nil {
			t.Fatalf("the request body %.200q: %v", sent, err)
		}
		c := body.Message.Content
		if body.Message.Role != "user" || len(c) != 2 || c[0].Type != "text" || c[0].Text != "What is in this picture?" ||
			c[1].Type != "image_url" || !strings.HasPrefix(c[1].ImageURL.URL, "data:image/png;base64,") {
			t.Fatalf("the message sent: %.300s", sent)
		}
		b.waitFor(5*time.Second, "the image in the message", `!!document.querySelector('.turn .msg.user .images img')`)
		// The helper's model takes images: it answers.
		b.waitText(turnTimeout, ".turn .msg.answer", "A grid of coloured dots")
		if b.exists(".turn .msg.error") {
			t.Fatalf("the turn with an image failed: %s", eval[string](b, `document.querySelector('.turn .msg.error').innerText`))
		}
		// After a reload the history shows the message with its image, and
		// the answer.
		b.run(30*time.Second, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)))
		b.waitText(10*time.Second, ".thread .msg.user", "What is in this picture?")
		b.waitFor(10*time.Second, "the image in the history", `(() => {
			const img = document.querySelector('.thread .msg.user .images img');
			return !!img && img.getAttribute('src').startsWith('data:image/png;base64,') && img.complete && img.naturalWidth > 0;
		})()`)
		b.waitText(10*time.Second, ".thread .msg.answer", "A grid of coloured dots")
		b.snap("image-history")
	})

	step("FailedFirstTurn", func(t *testing.T) {
		// A new chat whose first turn fails (the model refuses the key).
		b.run(5*time.Second, "new chat", chromedp.KeyEvent("o", chromedp.KeyModifiers(chromedp.ModifierCtrl, chromedp.ModifierShift)))
		b.waitFor(10*time.Second, "the cards", `!!document.querySelector('[role=radiogroup]') && document.activeElement?.id === 'message'`)
		b.click(`.card[data-assistant="helper"]`)
		b.run(10*time.Second, "send", chromedp.SendKeys(chromedp.CSS(`#message`), "Please fail this time\r"))
		b.waitText(turnTimeout, ".turn .msg.error", "invalid x-api-key")
		id := b.chatID()
		b.run(30*time.Second, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`nav[aria-label="Chats"]`)))
		b.waitText(10*time.Second, `.chats li.current .title`, "Please fail this time")
		b.waitText(10*time.Second, `.top h1`, "Please fail this time")
		b.waitText(10*time.Second, ".thread .msg.user", "Please fail this time")
		b.waitText(10*time.Second, ".thread .msg.error", "invalid x-api-key")
		if strings.Contains(eval[string](b, `document.querySelector('.chats').innerText`), id) {
			t.Errorf("the chat list shows the chat's id %s", id)
		}
		b.snap("failed-turn")
	})

	step("Skills", func(t *testing.T) {
		// The Skills view lists the assistants' own skills with what they
		// are for.
		b.click(`.skills-link`)
		b.waitText(10*time.Second, `ul[aria-label="The assistants' skills"] .title`, "changelog")
		b.waitText(10*time.Second, `section[aria-label="Skills of Coder"] .skill-card`, "Keep a Changelog")
		for _, w := range widths {
			b.resize(w)
			b.noHorizontalScroll("the skills at " + w.name)
			b.shot("skills", w)
		}
		b.resize(widths[2])
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// writePNG writes a small picture.
func writePNG(t *testing.T, path string) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 64, 48))
	for y := 0; y < 48; y++ {
		for x := 0; x < 64; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 4), uint8(y * 5), 160, 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}
