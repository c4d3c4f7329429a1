package docker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/sandbox"
)

// fakeTracked is a tracked set given by the test.
type fakeTracked map[string]bool

func (f fakeTracked) has(name string) bool { return f[name] }

// fakeEngine lists scripted containers and records removals.
type fakeEngine struct {
	list    []container.Summary
	listErr error
	failRm  map[string]error

	mu      sync.Mutex
	removed []string
}

func (e *fakeEngine) labelled(context.Context) ([]container.Summary, error) {
	return e.list, e.listErr
}

func (e *fakeEngine) remove(_ context.Context, id string) error {
	if err := e.failRm[id]; err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removed = append(e.removed, id)
	return nil
}

const (
	thisRun = "host/1/100/aaaa"
	liveRun = "host/2/200/bbbb"
	deadRun = "host/3/300/cccc"
)

var reapNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// ctr is a listed container called name with our labels, created age
// before reapNow by (instance, run).
func ctr(name, instance, run string, age time.Duration) container.Summary {
	return container.Summary{
		ID:      "id-" + name,
		Names:   []string{"/" + name},
		Created: reapNow.Add(-age).Unix(),
		Labels: map[string]string{
			sandbox.LabelProduct:  ProductLabelValue,
			sandbox.LabelInstance: instance,
			LabelRun:              run,
		},
	}
}

func newTestReaper(e reapEngine, tracked trackedSet) *reaper {
	return &reaper{
		engine: e, tracked: tracked, run: thisRun,
		alive: func(run string) bool { return run != deadRun },
		now:   func() time.Time { return reapNow },
		log:   slog.New(slog.DiscardHandler),
	}
}

func TestReaperVerdicts(t *testing.T) {
	t.Parallel()
	labelledOld := ctr("labelled-old", "other", liveRun, time.Minute)
	// The created label is older than the engine's own time (a container
	// recreated by an engine restore): the older one counts.
	labelledOld.Labels[sandbox.LabelCreated] = reapNow.Add(-2 * time.Hour).Format(time.RFC3339)
	unnamed := ctr("", "other", deadRun, time.Minute)
	unnamed.Names = nil
	e := &fakeEngine{list: []container.Summary{
		ctr("live-tracked", "me", thisRun, time.Minute),
		ctr("this-run-untracked", "me", thisRun, time.Minute),
		ctr("tracked-despite-dead-run", "me", deadRun, 3*time.Hour),
		ctr("dead-process", "other", deadRun, time.Minute),
		ctr("other-young", "other", liveRun, time.Minute),
		ctr("other-old", "other", liveRun, 2*time.Hour),
		ctr("same-instance-live-run", "me", liveRun, time.Minute),
		labelledOld,
		unnamed,
	}}
	tracked := fakeTracked{"live-tracked": true, "tracked-despite-dead-run": true}
	rp := newTestReaper(e, tracked)

	want := []string{"dead-process", "id-", "labelled-old", "other-old", "this-run-untracked"}
	got, err := rp.reap(context.Background(), ReapOptions{DryRun: true, Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dry run: reaped %v, want %v", got, want)
	}
	if len(e.removed) != 0 {
		t.Fatalf("dry run removed %v", e.removed)
	}

	got, err = rp.reap(context.Background(), ReapOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("reaped %v, want %v", got, want)
	}
	removed := slices.Sorted(slices.Values(e.removed))
	if w := []string{"id-", "id-dead-process", "id-labelled-old", "id-other-old", "id-this-run-untracked"}; !slices.Equal(removed, w) {
		t.Errorf("removed ids %v, want %v", removed, w)
	}

	// The default grace is DefaultReapGrace (an hour): a 90-minute-old
	// container of another live process goes, a 30-minute-old one stays.
	e2 := &fakeEngine{list: []container.Summary{
		ctr("old", "other", liveRun, 90*time.Minute), ctr("young", "other", liveRun, 30*time.Minute),
	}}
	got, err = newTestReaper(e2, fakeTracked{}).reap(context.Background(), ReapOptions{})
	if err != nil || !slices.Equal(got, []string{"old"}) {
		t.Errorf("default grace: reaped %v, %v; want [old]", got, err)
	}
}

func TestReaperErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("engine said no")
	e := &fakeEngine{
		list:   []container.Summary{ctr("a", "me", thisRun, 0), ctr("b", "me", thisRun, 0)},
		failRm: map[string]error{"id-a": boom},
	}
	got, err := newTestReaper(e, fakeTracked{}).reap(context.Background(), ReapOptions{})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "reap a") {
		t.Errorf("err = %v, want one naming a and wrapping the engine's", err)
	}
	if !slices.Equal(got, []string{"b"}) {
		t.Errorf("reaped %v, want [b]: one failure does not stop the others", got)
	}

	listFail := &fakeEngine{listErr: sandbox.ErrEngineUnavailable}
	if _, err := newTestReaper(listFail, fakeTracked{}).reap(context.Background(), ReapOptions{}); !errors.Is(err, sandbox.ErrEngineUnavailable) {
		t.Errorf("list failure: err = %v", err)
	}
}

// TestReaperLoop: the loop reaps at once, then on every tick, until its
// context ends.
func TestReaperLoop(t *testing.T) {
	t.Parallel()
	e := &fakeEngine{list: []container.Summary{ctr("a", "me", thisRun, 0)}}
	rp := newTestReaper(e, fakeTracked{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rp.loop(ctx, 10*time.Millisecond) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		n := len(e.removed)
		e.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reaps in 5s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}
