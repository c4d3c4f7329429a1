package checkpoint

import (
	"errors"
	"path/filepath"
	"testing"
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
	must(t, s.StartLog(bg, "u", "fork", []Entry{{ID: cp.ID, Turn: 2}}))
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
