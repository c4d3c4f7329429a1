package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// spinner animates a status line on a terminal (stderr) while nothing
// else is shown. Start and Stop may be called from any goroutine, any
// number of times; methods on a nil spinner do nothing.
type spinner struct {
	w io.Writer

	mu      sync.Mutex
	msg     string
	running bool
	stop    chan struct{}
	done    chan struct{}
}

func newSpinner(w io.Writer) *spinner { return &spinner{w: w} }

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Start shows msg (replacing the message of a running spinner).
func (s *spinner) Start(msg string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msg = msg
	if s.running {
		return
	}
	s.running = true
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop(s.stop, s.done)
}

func (s *spinner) loop(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for i := 0; ; i++ {
		s.mu.Lock()
		msg := s.msg
		s.mu.Unlock()
		fmt.Fprintf(s.w, "\r\x1b[K%s%s %s… %s%s", styleCyan, spinFrames[i%len(spinFrames)], msg,
			styleDim+fmt.Sprintf("%.0fs", time.Since(start).Seconds()), styleReset)
		select {
		case <-stop:
			fmt.Fprint(s.w, "\r\x1b[K")
			return
		case <-t.C:
		}
	}
}

// Stop clears the spinner line and waits for it.
func (s *spinner) Stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.running = false
	stop, done := s.stop, s.done
	s.mu.Unlock()
	close(stop)
	<-done
}
