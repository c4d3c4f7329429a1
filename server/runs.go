package server

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// Defaults of the resumable event streams (Config.ResumeBuffer,
// Config.ResumeRetention).
const (
	DefaultResumeBuffer    = 16 << 20
	DefaultResumeRetention = 5 * time.Minute
)

// run is one native turn and the log of its event stream: every frame
// carries the id "<run id>.<seq>" (seq counts from 1), so a client that
// lost its connection resumes after the last id it saw
// (GET /api/chats/{chat}/events with Last-Event-ID), and a page that
// reloads replays the turn from its start. The log keeps the newest
// frames up to the buffer size. A run is safe for concurrent use: one
// producer (the turn), any number of followers.
type run struct {
	id        string
	user      string
	chatID    string
	assistant string
	prompt    string
	started   time.Time
	detached  bool
	cancel    context.CancelFunc

	mu      sync.Mutex
	frames  []frame
	base    int // the seq of frames[0] is base+1
	size    int
	max     int
	wake    chan struct{}
	done    bool
	ended   time.Time
	err     error // the turn's error, once done
	over    chan struct{}
	sawErr  bool
	sawDone bool
	// answered is when the turn sent its done event: its client has the
	// whole answer, and what follows (the sandbox's removal, the chat's
	// release) is the server's.
	answered time.Time
}

// frame is one encoded server-sent event of a run.
type frame struct {
	seq  int
	data []byte
	// final marks error and done events, which a new stream holds back
	// until something else was sent (see follow).
	final bool
	// done marks the turn's done event: the last its client needs.
	done bool
}

func newRun(id, user, chatID, assistant string, detached bool, max int) *run {
	return &run{id: id, user: user, chatID: chatID, assistant: assistant, started: time.Now(),
		detached: detached, max: max, wake: make(chan struct{}), over: make(chan struct{})}
}

// emit encodes e as the run's next frame. It is the run's EmitFunc,
// called through a chat.Serial.
func (r *run) emit(e chat.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	if e.Type == chat.TypeError && e.Event == chat.Start {
		r.sawErr = true
	}
	if e.Event == chat.Done {
		r.sawDone, r.answered = true, time.Now()
	}
	r.appendLocked(e)
}

func (r *run) appendLocked(e chat.Event) {
	seq := r.base + len(r.frames) + 1
	data, err := chat.SSEFrameID(r.id+"."+strconv.Itoa(seq), e)
	if err != nil {
		return // Check failed: the event breaks the contract and is not sent
	}
	r.frames = append(r.frames, frame{seq: seq, data: data, final: e.Type == chat.TypeError || e.Event == chat.Done, done: e.Event == chat.Done})
	r.size += len(data)
	// Keep the newest frames within the buffer (always the last one).
	drop := 0
	for r.size > r.max && drop < len(r.frames)-1 {
		r.size -= len(r.frames[drop].data)
		drop++
	}
	if drop > 0 {
		r.frames = append(r.frames[:0:0], r.frames[drop:]...)
		r.base += drop
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// finish ends the run: an error event when the turn failed without one,
// the done event when the turn sent none, then the end of the log.
func (r *run) finish(resp *pipeline.Response, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	if err != nil && !r.sawErr {
		e := asAPIError(err)
		chat.ErrorEvent(r.appendLocked, "error-server", e.Err.Code, e.Err.Message)
	}
	if !r.sawDone {
		final := &chat.Final{}
		if resp != nil {
			final = &chat.Final{Usage: resp.Usage, SessionID: resp.SessionID, Content: resp.Content, Data: resp.Data}
		}
		if err != nil {
			final.Error = asAPIError(err).Err.Code
		}
		r.appendLocked(chat.Event{Event: chat.Done, Final: final})
	}
	r.done, r.err, r.ended = true, err, time.Now()
	close(r.wake) // followers waiting for more learn that none comes
	r.wake = make(chan struct{})
	close(r.over)
}

// since returns the frames after seq and from, the seq just before the
// first of them (seq, unless frames before were dropped from the buffer:
// dropped then), whether the run is over (no frame will follow these),
// and a channel closed when more come.
func (r *run) since(seq int) (out []frame, from int, dropped, done bool, wake <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < r.base {
		dropped = true
		seq = r.base
	}
	if i := seq - r.base; i < len(r.frames) {
		out = r.frames[i:]
	}
	return out, seq, dropped, r.done, r.wake
}

// hasAnswered reports whether the turn sent its done event.
func (r *run) hasAnswered() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sawDone
}

// result is the turn's error once the run is over.
func (r *run) result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// state describes the run for a client: GET /api/chats/{chat} has it.
func (r *run) state() *TurnState {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A turn that sent its done event has ended for its client, whose
	// sandbox the server may still be removing.
	st := &TurnState{ID: r.id, AssistantID: r.assistant, Prompt: r.prompt, Started: r.started, Running: !r.done && !r.sawDone, Detached: r.detached,
		LastEventID: r.id + "." + strconv.Itoa(r.base+len(r.frames))}
	switch {
	case r.sawDone:
		st.Ended = &r.answered
	case r.done:
		st.Ended = &r.ended
	}
	return st
}

// TurnState is a native turn as GET /api/chats/{chat} reports it: the
// running one, or the last one for a few minutes after it ended, whose
// events GET /api/chats/{chat}/events replays.
type TurnState struct {
	ID          string `json:"id"`
	AssistantID string `json:"assistant_id"`
	// Prompt is the user's message that started the turn.
	Prompt  string     `json:"prompt,omitempty"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	Running bool       `json:"running"`
	// Detached turns keep running when their client goes away.
	Detached bool `json:"detached"`
	// LastEventID is the id of the newest event so far.
	LastEventID string `json:"last_event_id"`
}

// runs is the server's registry of native turns: the running ones and,
// for the retention time, those that ended.
type runs struct {
	retention time.Duration
	buffer    int

	mu   sync.Mutex
	byID map[string]*run
}

func newRuns(buffer int, retention time.Duration) *runs {
	return &runs{buffer: buffer, retention: retention, byID: map[string]*run{}}
}

// start registers a new run of req's turn.
func (rs *runs) start(req *pipeline.Request, detached bool) *run {
	r := newRun(newID("r-"), req.UserID, req.ChatID, req.AssistantID, detached, rs.buffer)
	for _, m := range req.Messages {
		if m.Role == chat.RoleUser {
			r.prompt = m.Content
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.sweepLocked(time.Now())
	rs.byID[r.id] = r
	return r
}

func (rs *runs) sweepLocked(now time.Time) {
	for id, r := range rs.byID {
		r.mu.Lock()
		old := r.done && now.Sub(r.ended) > rs.retention
		r.mu.Unlock()
		if old {
			delete(rs.byID, id)
		}
	}
}

// find returns the user's run of the chat with the given id, or when id
// is "" the chat's newest run; nil when there is none.
func (rs *runs) find(user, chatID, id string) *run {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.sweepLocked(time.Now())
	if id != "" {
		r := rs.byID[id]
		if r == nil || r.user != user || r.chatID != chatID {
			return nil
		}
		return r
	}
	var newest *run
	for _, r := range rs.byID {
		if r.user == user && r.chatID == chatID && (newest == nil || r.started.After(newest.started)) {
			newest = r
		}
	}
	return newest
}

// forget drops the runs of a deleted chat.
func (rs *runs) forget(user, chatID string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for id, r := range rs.byID {
		if r.user == user && r.chatID == chatID {
			delete(rs.byID, id)
		}
	}
}

// cancelAll cancels every running run (a shutdown whose drain time is
// over).
func (rs *runs) cancelAll() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.byID {
		if r.cancel != nil {
			r.cancel()
		}
	}
}

// parseEventID splits a Last-Event-ID "<run id>.<seq>".
func parseEventID(s string) (id string, seq int, err error) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 {
		return "", 0, badRequest("Last-Event-ID %q is not an event id of this server (<turn>.<number>)", s)
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return "", 0, badRequest("Last-Event-ID %q is not an event id of this server (<turn>.<number>)", s)
	}
	if err := validateID("turn", s[:i]); err != nil {
		return "", 0, badRequest("Last-Event-ID %q: %v", s, err)
	}
	return s[:i], n, nil
}

// errNoTurn is the answer for a resume with nothing to resume.
func errNoTurn(chatID, id string) error {
	if id != "" {
		return notFound("no turn %q in chat %q to resume: it ended more than a few minutes ago or on another server (GET /api/chats/%s has the history)", id, chatID, chatID)
	}
	return notFound("chat %q has no running turn to follow (GET /api/chats/%s has the history)", chatID, chatID)
}
