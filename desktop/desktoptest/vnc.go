package desktoptest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
)

// VNC is a small RFB 3.8 client (no authentication, raw encoding), as
// much of one as a test needs to drive a desktop's screen the way noVNC
// does and to know that the server took what it was sent.
type VNC struct {
	c             net.Conn
	r             *bufio.Reader
	Width, Height int
	bytesPerPixel int
}

// DialVNC does the RFB handshake on c (a VNC server's connection, or
// websockify's WebSocket as a net.Conn).
func DialVNC(c net.Conn) (*VNC, error) {
	v := &VNC{c: c, r: bufio.NewReaderSize(c, 64<<10)}
	ver := make([]byte, 12)
	if _, err := io.ReadFull(v.r, ver); err != nil {
		return nil, fmt.Errorf("vnc: server version: %w", err)
	}
	if string(ver[:4]) != "RFB " {
		return nil, fmt.Errorf("vnc: not an RFB server: %q", ver)
	}
	if _, err := c.Write([]byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	n, err := v.r.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("vnc: security types: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("vnc: refused: %s", v.reason())
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(v.r, types); err != nil {
		return nil, err
	}
	if !slices.Contains(types, 1) {
		return nil, fmt.Errorf("vnc: the server wants authentication (security types %v)", types)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return nil, err
	}
	var result uint32
	if err := binary.Read(v.r, binary.BigEndian, &result); err != nil {
		return nil, fmt.Errorf("vnc: security result: %w", err)
	}
	if result != 0 {
		return nil, fmt.Errorf("vnc: refused: %s", v.reason())
	}
	if _, err := c.Write([]byte{1}); err != nil { // ClientInit: shared
		return nil, err
	}
	var init struct {
		Width, Height uint16
		BitsPerPixel  uint8
		_             [15]byte // the rest of the pixel format
		NameLen       uint32
	}
	if err := binary.Read(v.r, binary.BigEndian, &init); err != nil {
		return nil, fmt.Errorf("vnc: server init: %w", err)
	}
	if _, err := v.r.Discard(int(init.NameLen)); err != nil {
		return nil, err
	}
	v.Width, v.Height, v.bytesPerPixel = int(init.Width), int(init.Height), int(init.BitsPerPixel)/8
	return v, nil
}

func (v *VNC) reason() string {
	var n uint32
	if err := binary.Read(v.r, binary.BigEndian, &n); err != nil || n > 1<<16 {
		return "no reason given"
	}
	b := make([]byte, n)
	_, _ = io.ReadFull(v.r, b)
	return string(b)
}

// Click presses and releases the left mouse button at (x, y).
func (v *VNC) Click(x, y int) error {
	msg := []byte{5, 0, byte(x >> 8), byte(x), byte(y >> 8), byte(y)}
	for _, mask := range []byte{0, 1, 0} {
		msg[1] = mask
		if _, err := v.c.Write(msg); err != nil {
			return err
		}
	}
	return nil
}

// Key presses and releases the key of an X keysym (0x61: a).
func (v *VNC) Key(keysym uint32) error {
	for _, down := range []byte{1, 0} {
		msg := []byte{4, down, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(msg[4:], keysym)
		if _, err := v.c.Write(msg); err != nil {
			return err
		}
	}
	return nil
}

// Sync asks for the whole screen and reads it: the server answers in
// order, so it has handled every message sent before.
func (v *VNC) Sync() error {
	req := []byte{3, 0, 0, 0, 0, 0, byte(v.Width >> 8), byte(v.Width), byte(v.Height >> 8), byte(v.Height)}
	if _, err := v.c.Write(req); err != nil {
		return err
	}
	for {
		typ, err := v.r.ReadByte()
		if err != nil {
			return fmt.Errorf("vnc: %w", err)
		}
		switch typ {
		case 0: // FramebufferUpdate
			var hdr struct {
				_     uint8
				Rects uint16
			}
			if err := binary.Read(v.r, binary.BigEndian, &hdr); err != nil {
				return err
			}
			for range hdr.Rects {
				var rect struct {
					X, Y, W, H uint16
					Encoding   int32
				}
				if err := binary.Read(v.r, binary.BigEndian, &rect); err != nil {
					return err
				}
				if rect.Encoding != 0 {
					return fmt.Errorf("vnc: encoding %d, want raw", rect.Encoding)
				}
				if _, err := v.r.Discard(int(rect.W) * int(rect.H) * v.bytesPerPixel); err != nil {
					return err
				}
			}
			return nil
		case 2: // Bell
		case 3: // ServerCutText
			var hdr struct {
				_   [3]byte
				Len uint32
			}
			if err := binary.Read(v.r, binary.BigEndian, &hdr); err != nil {
				return err
			}
			if _, err := v.r.Discard(int(hdr.Len)); err != nil {
				return err
			}
		default:
			return errors.New("vnc: unexpected server message " + fmt.Sprint(typ))
		}
	}
}

// Close closes the connection.
func (v *VNC) Close() error { return v.c.Close() }
