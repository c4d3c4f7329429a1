package checkpoint

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestLogBranchesAndRetention(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	var ids []string
	for i, content := range []string{"one", "two", "three"} {
		write(t, filepath.Join(ws, "f"), content)
		cp := snap(t, s, "u", "c", ws, nil)
		if _, _, err := s.Record(bg, "u", "c", Entry{ID: cp.ID, Turn: i + 1}, 0); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cp.ID)
	}
	l, err := s.Log(bg, "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	if l.Head != ids[2] || len(l.Current()) != 3 || l.AtTurn(2).ID != ids[1] || l.Entries[1].Parent != ids[0] {
		t.Fatalf("log = %+v", l)
	}

	// Rewind to turn 1, then a new turn 2: turns 2 and 3 stay, on another
	// branch.
	must(t, s.SetHead(bg, "u", "c", ids[0]))
	write(t, filepath.Join(ws, "f"), "other two")
	cp := snap(t, s, "u", "c", ws, nil)
	l, dropped, err := s.Record(bg, "u", "c", Entry{ID: cp.ID, Turn: 2}, 0)
	if err != nil || dropped != 0 {
		t.Fatal(dropped, err)
	}
	cur := l.Current()
	if len(cur) != 2 || cur[0].ID != ids[0] || cur[1].ID != cp.ID || len(l.Entries) != 4 {
		t.Fatalf("after a rewind and a turn: current %+v, log %+v", cur, l)
	}
	if l.AtTurn(3) != nil {
		t.Error("turn 3 is on another branch, not the current one")
	}
	if err := s.SetHead(bg, "u", "c", "0000000000000000000000000000000000000000000000000000000000000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetHead to a checkpoint not in the log: %v", err)
	}

	// Retention keeps 2: the oldest two go, and Collect frees their
	// objects.
	write(t, filepath.Join(ws, "f"), "five")
	last := snap(t, s, "u", "c", ws, nil)
	l, dropped, err = s.Record(bg, "u", "c", Entry{ID: last.ID, Turn: 3}, 2)
	if err != nil || dropped != 3 || len(l.Entries) != 2 || l.Head != last.ID {
		t.Fatalf("retention: dropped %d, log %+v, %v", dropped, l, err)
	}
	col, err := s.CollectLogs(bg, "u")
	if err != nil {
		t.Fatal(err)
	}
	if col.Objects == 0 {
		t.Errorf("nothing collected: %+v", col)
	}
	if _, err := s.Restore(bg, "u", "c", ids[0], t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a dropped checkpoint restores: %v", err)
	}
	if _, err := s.Restore(bg, "u", "c", cp.ID, t.TempDir()); err != nil {
		t.Errorf("a kept checkpoint: %v", err)
	}

	// A fork's log keeps the objects when the parent is forgotten.
	must(t, s.StartLog(bg, "u", "fork", []Entry{{ID: cp.ID, Turn: 2}}, []string{"c"}))
	must(t, s.ForgetChat("u", "c"))
	if _, err := s.CollectLogs(bg, "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(bg, "u", "fork", cp.ID, t.TempDir()); err != nil {
		t.Errorf("the fork's checkpoint after its parent was forgotten: %v", err)
	}
	if l, _ := s.Log(bg, "u", "c"); len(l.Entries) != 0 {
		t.Errorf("a forgotten chat's log: %+v", l)
	}
}

// TestBranches: the versions of each turn of the current branch, as a
// rewind, a Before checkpoint, an edit and a switch make them.
func TestBranches(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ws := t.TempDir()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	record := func(content string, e Entry) string {
		t.Helper()
		write(t, filepath.Join(ws, "f"), content)
		e.ID = snap(t, s, "u", "c", ws, nil).ID
		at = at.Add(time.Minute)
		e.Time = at
		if _, _, err := s.Record(bg, "u", "c", e, 0); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	versions := func() []TurnVersions {
		t.Helper()
		l, err := s.Log(bg, "u", "c")
		if err != nil {
			t.Fatal(err)
		}
		return l.Branches()
	}
	record("", Entry{Turn: 0, Before: true})
	t1 := record("one", Entry{Turn: 1})
	t2 := record("two", Entry{Turn: 2})
	t3 := record("three", Entry{Turn: 3})
	if v := versions(); len(v) != 3 || len(v[0].Versions) != 1 || v[2].Versions[0].Tip != t3 {
		t.Fatalf("one branch: %+v", v)
	}
	// Turn 2 sent again (edited) from turn 1; then a file uploaded, so
	// turn 3 starts from a Before state.
	must(t, s.SetHead(bg, "u", "c", t1))
	t2b := record("two b", Entry{Turn: 2})
	before := record("two b, uploaded", Entry{Turn: 2, Before: true})
	t3b := record("three b", Entry{Turn: 3})
	// Turn 3 sent again from the Before state: a second version of 3b.
	must(t, s.SetHead(bg, "u", "c", before))
	t3c := record("three c", Entry{Turn: 3, Failed: true})
	v := versions()
	if len(v) != 3 {
		t.Fatalf("turns: %+v", v)
	}
	if got := v[1]; got.Turn != 2 || got.Current != 1 || len(got.Versions) != 2 || got.Versions[0].Checkpoint != t2 || got.Versions[0].Tip != t3 || got.Versions[1].Tip != t3c {
		t.Errorf("turn 2: %+v", got)
	}
	if got := v[2]; got.Current != 1 || len(got.Versions) != 2 || got.Versions[0].Checkpoint != t3b || !got.Versions[1].Failed {
		t.Errorf("turn 3: %+v", got)
	}
	// Switching back to the first version of turn 2 goes to its tip.
	must(t, s.SetHead(bg, "u", "c", v[1].Versions[0].Tip))
	if v := versions(); v[1].Current != 0 || len(v[2].Versions) != 1 || v[2].Versions[0].Checkpoint != t3 {
		t.Errorf("after the switch: %+v", v)
	}
	// The same state recorded again is the same checkpoint, not another
	// version.
	if l, _, err := s.Record(bg, "u", "c", Entry{ID: t2b, Turn: 2}, 0); err != nil || l.Head != t2b || len(l.Entries) != 8 {
		t.Errorf("a state recorded twice: %+v, %v", l, err)
	}
}
