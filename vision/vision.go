// Package vision holds what a turn does with the images of its messages:
// it checks a data: URL (Parse), fetches an http(s) image from a host the
// operator allows (Fetcher), and makes the copies a coding-agent CLI and
// the chat history get: resized so that neither side is longer than
// MaxSide and capped in number and size, as Yao's sandbox runners do
// (yao agent/sandbox/v2/shared/vision.go).
package vision

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // decodes WebP, which clients send

	"github.com/agentbox/agentbox/chat"
)

// Bounds of images, Yao's where it has them (its sandbox runners').
const (
	// MaxBytes bounds one image, decoded.
	MaxBytes = 10 << 20
	// MaxPerMessage bounds the images of one message (Yao: 10).
	MaxPerMessage = 10
	// MaxSide is the longest side of the copies CLIs and the history get
	// (Yao's DefaultMaxSize, 1080 pixels).
	MaxSide = 1080
	// MaxPixels bounds an image's width times height, so a small file
	// cannot claim a huge canvas to decode.
	MaxPixels = 50_000_000
	// MaxCLIBase64 and MaxCLITotalBase64 bound what one CLI run is given:
	// each image and all of them, base64-encoded (Yao: 20 MiB and 48 MiB).
	MaxCLIBase64      = 20 << 20
	MaxCLITotalBase64 = 48 << 20
)

// MediaTypes are the image types taken: those the model APIs take.
var MediaTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Image is one image, decoded.
type Image struct {
	// MediaType is one of MediaTypes, as the image's bytes say.
	MediaType string
	Data      []byte
	// Width and Height are its size in pixels.
	Width, Height int
}

// DataURL is the image as a data: URL.
func (im Image) DataURL() string {
	return "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

// Ext is the file name extension of its type (".png").
func (im Image) Ext() string {
	switch im.MediaType {
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	}
	return ".png"
}

// Errors of Parse and Fetcher.Fetch; each is wrapped with the detail.
var (
	ErrNotImage = errors.New("not an image")
	ErrTooLarge = errors.New("image too large")
)

// Parse checks a data: URL and decodes its image: base64, of a type of
// MediaTypes (as its bytes say, whatever the URL claims), at most MaxBytes
// and MaxPixels.
func Parse(url string) (Image, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return Image{}, fmt.Errorf("%w: want a data: URL (data:image/png;base64,...)", ErrNotImage)
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return Image{}, fmt.Errorf("%w: a data: URL needs ;base64 and a comma before the data", ErrNotImage)
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > MaxBytes+3 {
		return Image{}, fmt.Errorf("%w: %d bytes of base64, at most %d bytes of image", ErrTooLarge, len(payload), MaxBytes)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return Image{}, fmt.Errorf("%w: its base64 does not decode: %v", ErrNotImage, err)
	}
	return Decode(data)
}

// Decode checks an image's bytes: a type of MediaTypes, at most MaxBytes
// and MaxPixels, and a header that decodes.
func Decode(data []byte) (Image, error) {
	if len(data) > MaxBytes {
		return Image{}, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Image{}, fmt.Errorf("%w: want PNG, JPEG, GIF or WebP (%v)", ErrNotImage, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > MaxPixels {
		return Image{}, fmt.Errorf("%w: %dx%d pixels, at most %d in all", ErrTooLarge, cfg.Width, cfg.Height, MaxPixels)
	}
	return Image{MediaType: "image/" + format, Data: data, Width: cfg.Width, Height: cfg.Height}, nil
}

// Fit returns the image resized so that neither side is longer than
// maxSide, keeping its proportions, as Yao's ResizeForVision does: one
// that fits is returned as it is; a larger one is scaled (bilinear) and
// encoded again, PNG and GIF as themselves, the others as JPEG (quality
// 85).
func Fit(im Image, maxSide int) (Image, error) {
	if im.Width <= maxSide && im.Height <= maxSide {
		return im, nil
	}
	src, format, err := image.Decode(bytes.NewReader(im.Data))
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v", ErrNotImage, err)
	}
	w, h := im.Width, im.Height
	if w > h {
		w, h = maxSide, max(1, h*maxSide/w)
	} else {
		w, h = max(1, w*maxSide/h), maxSide
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.BiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Over, nil)
	var buf bytes.Buffer
	out := Image{Width: w, Height: h}
	switch format {
	case "png":
		out.MediaType, err = "image/png", png.Encode(&buf, dst)
	case "gif":
		out.MediaType, err = "image/gif", gif.Encode(&buf, dst, nil)
	default:
		out.MediaType, err = "image/jpeg", jpeg.Encode(&buf, dst, &jpeg.Options{Quality: 85})
	}
	if err != nil {
		return Image{}, fmt.Errorf("encode the resized image: %w", err)
	}
	out.Data = buf.Bytes()
	return out, nil
}

// ForCLI returns the images a coding-agent CLI gets with a turn, as Yao's
// runners choose them: those of the last user message, each fitted to
// MaxSide, at most MaxPerMessage, an image over MaxCLIBase64 encoded left
// out, and no more once MaxCLITotalBase64 is reached.
func ForCLI(input []chat.Message) ([]Image, error) {
	var last *chat.Message
	for i := len(input) - 1; i >= 0; i-- {
		if input[i].Role == chat.RoleUser {
			last = &input[i]
			break
		}
	}
	if last == nil {
		return nil, nil
	}
	var out []Image
	total := 0
	for _, u := range last.Images() {
		if len(out) == MaxPerMessage {
			break
		}
		im, err := Parse(u.URL)
		if err != nil {
			return nil, err
		}
		if im, err = Fit(im, MaxSide); err != nil {
			return nil, err
		}
		n := base64.StdEncoding.EncodedLen(len(im.Data))
		if n > MaxCLIBase64 {
			continue
		}
		if total+n > MaxCLITotalBase64 {
			break
		}
		total += n
		out = append(out, im)
	}
	return out, nil
}
