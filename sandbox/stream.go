package sandbox

import (
	"io"
	"sync"
)

// Stream is an in-memory pipe between a process's output and its reader:
// Read returns data as soon as it is written. Unlike io.Pipe, a writer is
// only held back once Max bytes wait unread (with Block set), or never
// (without Block: the oldest unread bytes are dropped to keep the newest
// Max, so an unread stderr cannot stall a process, and its tail survives).
// After CloseRead, writes are discarded. Safe for one reader and one writer
// at a time.
type Stream struct {
	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	max     int
	block   bool
	closed  bool // writer side done
	err     error
	gone    bool // reader side done
	dropped int64
}

// NewStream returns a Stream holding at most max unread bytes (0: 1 MiB).
func NewStream(max int, block bool) *Stream {
	if max <= 0 {
		max = 1 << 20
	}
	s := &Stream{max: max, block: block}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Write queues p for the reader.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if s.gone || s.closed {
			return n, nil
		}
		room := s.max - len(s.buf)
		if room <= 0 {
			if s.block {
				s.cond.Wait()
				continue
			}
			// Keep the newest bytes.
			drop := min(len(p), len(s.buf))
			s.buf = append(s.buf[:0], s.buf[drop:]...)
			s.dropped += int64(drop)
			room = s.max - len(s.buf)
		}
		k := min(room, len(p))
		s.buf = append(s.buf, p[:k]...)
		p = p[k:]
		s.cond.Broadcast()
	}
	return n, nil
}

// Read returns queued data, waiting for some; io.EOF (or the error given to
// CloseWithError) once the writer is done and the queue is empty.
func (s *Stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.buf) == 0 {
		if s.closed {
			if s.err != nil {
				return 0, s.err
			}
			return 0, io.EOF
		}
		if s.gone {
			return 0, io.ErrClosedPipe
		}
		s.cond.Wait()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	if len(s.buf) == 0 {
		s.buf = nil
	}
	s.cond.Broadcast()
	return n, nil
}

// CloseWithError ends the writer side; the reader gets err (nil: io.EOF)
// after the queued data. Idempotent: the first call wins.
func (s *Stream) CloseWithError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed, s.err = true, err
	}
	s.cond.Broadcast()
}

// Close ends the writer side (the reader gets io.EOF).
func (s *Stream) Close() error { s.CloseWithError(nil); return nil }

// CloseRead gives up reading: pending and future writes are discarded, so
// the writer never blocks again.
func (s *Stream) CloseRead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	s.buf = nil
	s.cond.Broadcast()
}

// Dropped reports how many bytes a non-blocking Stream dropped.
func (s *Stream) Dropped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}
