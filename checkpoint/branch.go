package checkpoint

import (
	"slices"
	"time"
)

// A chat's log is a tree: each checkpoint names the one the chat was at
// when it was taken (Parent). A rewind, or an edited message sent again,
// starts another line from an earlier checkpoint; the lines that stop
// there are the chat's other branches, as a chat app keeps the versions of
// an edited message. Branches describes them turn by turn along the
// current branch, for a "< 2/3 >" switch on each message.

// Version is one version of a turn: the turn's checkpoint and the newest
// checkpoint of the branch that goes on from it (Tip), the one a switch
// to this version goes to.
type Version struct {
	// Checkpoint is the state after the turn; Tip the newest state after
	// it on this branch (the chat's head for the current version).
	Checkpoint string    `json:"checkpoint"`
	Tip        string    `json:"tip"`
	TipTurn    int       `json:"tip_turn"`
	Time       time.Time `json:"time"`
	Failed     bool      `json:"failed,omitempty"`
}

// TurnVersions are the versions of one turn of the current branch, oldest
// first; Current is the index of the one the chat is on.
type TurnVersions struct {
	Turn     int       `json:"turn"`
	Current  int       `json:"current"`
	Versions []Version `json:"versions"`
}

// Branches returns, for each turn of the chat's current branch, its
// versions: the turns taken from the same state (the same checkpoint
// before them, a Before checkpoint counting as the one it followed).
func (l *ChatLog) Branches() []TurnVersions {
	byID := make(map[string]*Entry, len(l.Entries))
	for i := range l.Entries {
		if _, ok := byID[l.Entries[i].ID]; !ok {
			byID[l.Entries[i].ID] = &l.Entries[i]
		}
	}
	// base is the turn checkpoint a turn followed ("" for the chat's
	// first, or when that one was dropped by retention).
	base := func(e *Entry) string {
		seen := map[string]bool{}
		for id := e.Parent; id != "" && !seen[id]; {
			seen[id] = true
			p := byID[id]
			if p == nil {
				return ""
			}
			if !p.Before {
				return id
			}
			id = p.Parent
		}
		return ""
	}
	children := map[string][]*Entry{}
	for i := range l.Entries {
		e := &l.Entries[i]
		if byID[e.ID] == e && e.Parent != "" {
			children[e.Parent] = append(children[e.Parent], e)
		}
	}
	// tip is the newest turn checkpoint of e's subtree.
	tip := func(e *Entry) *Entry {
		best := e
		seen := map[string]bool{}
		stack := []*Entry{e}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[n.ID] {
				continue
			}
			seen[n.ID] = true
			if !n.Before && n.Time.After(best.Time) {
				best = n
			}
			stack = append(stack, children[n.ID]...)
		}
		return best
	}
	groups := map[string][]*Entry{} // base -> the turn checkpoints after it
	for i := range l.Entries {
		e := &l.Entries[i]
		if byID[e.ID] == e && !e.Before {
			b := base(e)
			groups[b] = append(groups[b], e)
		}
	}
	var out []TurnVersions
	for _, cur := range l.Current() {
		if cur.Before {
			continue
		}
		tv := TurnVersions{Turn: cur.Turn}
		for _, e := range groups[base(byID[cur.ID])] {
			if e.Turn != cur.Turn {
				continue
			}
			t := tip(e)
			v := Version{Checkpoint: e.ID, Tip: t.ID, TipTurn: t.Turn, Time: e.Time, Failed: e.Failed}
			if e.ID == cur.ID {
				if h := byID[l.Head]; h != nil {
					v.Tip, v.TipTurn = h.ID, h.Turn
				}
			}
			tv.Versions = append(tv.Versions, v)
		}
		slices.SortStableFunc(tv.Versions, func(a, b Version) int { return a.Time.Compare(b.Time) })
		for i, v := range tv.Versions {
			if v.Checkpoint == cur.ID {
				tv.Current = i
			}
		}
		out = append(out, tv)
	}
	return out
}

// BeforeTurn returns the state turn n (from 1) of the chat's current
// branch started from: the checkpoint before that turn's (a Before state,
// or the turn before's, a failed one too), or nil when the log does not
// hold it.
func (l *ChatLog) BeforeTurn(n int) *Entry {
	cur := l.Current()
	for i := len(cur) - 1; i > 0; i-- {
		if cur[i].Turn == n && !cur[i].Before {
			return l.Find(cur[i-1].ID)
		}
	}
	return nil
}
