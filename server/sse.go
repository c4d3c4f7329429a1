package server

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/sse"
)

// ping is the heartbeat's frame, a comment clients skip.
var ping = sse.Comment("ping")

// errStreamClosed is returned by writes after the handler finished.
var errStreamClosed = errors.New("event stream closed")

// DefaultHeartbeat is how long an event stream may stay silent before the
// server sends a ": ping" comment, so proxies and clients do not time out
// while a sandbox starts or a tool runs.
const DefaultHeartbeat = 15 * time.Second

// sseStream writes a server-sent event stream. Headers are sent lazily,
// with the first frame (or heartbeat), so a request that fails before any
// output still gets a proper HTTP error status. Every frame is flushed at
// once. It is safe for concurrent use; after close it drops writes.
type sseStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// onCommit runs once, right after the headers, with mu held; it
	// writes through raw (the OpenAI endpoint sends its role chunk there).
	onCommit func(raw func([]byte) error) error

	mu        sync.Mutex
	committed bool
	closed    bool
	err       error
	last      time.Time

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

func newSSEStream(w http.ResponseWriter, heartbeat time.Duration, onCommit func(raw func([]byte) error) error) *sseStream {
	s := &sseStream{
		w:        w,
		rc:       http.NewResponseController(w),
		onCommit: onCommit,
		last:     time.Now(),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go s.heartbeat(heartbeat)
	return s
}

func (s *sseStream) heartbeat(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			if !s.closed && s.err == nil && now.Sub(s.last) >= every {
				_ = s.writeLocked(ping)
			}
			s.mu.Unlock()
		}
	}
}

// Committed reports whether the headers went out.
func (s *sseStream) Committed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// Commit sends the headers (and onCommit's frames) if not yet sent.
func (s *sseStream) Commit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked()
}

func (s *sseStream) commitLocked() error {
	if s.committed {
		return s.err
	}
	s.committed = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	s.w.WriteHeader(http.StatusOK)
	if s.onCommit != nil {
		if err := s.onCommit(s.raw); err != nil {
			s.err = err
			return err
		}
	}
	return s.flushLocked()
}

// Write sends one complete frame and flushes it.
func (s *sseStream) Write(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(frame)
}

// raw writes without committing or flushing; only for onCommit, with mu
// held.
func (s *sseStream) raw(frame []byte) error {
	_, err := s.w.Write(frame)
	return err
}

func (s *sseStream) writeLocked(frame []byte) error {
	if s.closed {
		return errStreamClosed
	}
	if s.err != nil {
		return s.err
	}
	if err := s.commitLocked(); err != nil {
		return err
	}
	if _, err := s.w.Write(frame); err != nil {
		s.err = err
		return err
	}
	return s.flushLocked()
}

func (s *sseStream) flushLocked() error {
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return err
	}
	s.last = time.Now()
	return nil
}

// StopHeartbeat stops the heartbeat goroutine and waits for it, so that
// Committed stays what it is unless the caller writes. It is idempotent.
func (s *sseStream) StopHeartbeat() {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
}

// Close stops the heartbeat; later writes are dropped. It must be called
// before the handler returns and is idempotent.
func (s *sseStream) Close() {
	s.StopHeartbeat()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
