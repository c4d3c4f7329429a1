package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/store"
)

// testUsageEgress: a turn's egress lines are stored with its usage
// record and totalled per host; bad lines refuse the whole record.
func testUsageEgress(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := bg
	base := time.Now().Add(-time.Hour)
	for _, r := range []store.UsageRecord{
		{Time: base, UserID: "alice", Usage: chat.Usage{InputTokens: 1, Egress: []chat.HostUsage{
			{Host: "api.github.com:443", Requests: 3, BytesSent: 100, BytesReceived: 2000},
			{Host: "evil.test:443", Denied: 2},
		}}},
		{Time: base.Add(time.Minute), UserID: "alice", Usage: chat.Usage{Egress: []chat.HostUsage{
			{Host: "api.github.com:443", Requests: 1, BytesSent: 10, BytesReceived: 20},
		}}},
		{Time: base, UserID: "bob", Usage: chat.Usage{Egress: []chat.HostUsage{{Host: "registry.npmjs.org:443", Requests: 7}}}},
		{Time: base, UserID: "bob"}, // no egress
	} {
		if err := s.RecordUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := s.UsageSummary(ctx, "alice", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := []chat.HostUsage{
		{Host: "api.github.com:443", Requests: 4, BytesSent: 110, BytesReceived: 2020},
		{Host: "evil.test:443", Denied: 2},
	}
	if sum.Requests != 2 || !reflect.DeepEqual(sum.Usage.Egress, want) {
		t.Errorf("alice: %d requests, egress %+v", sum.Requests, sum.Usage.Egress)
	}
	all, err := s.UsageSummary(ctx, "", time.Time{})
	if err != nil || len(all.Usage.Egress) != 3 || all.Requests != 4 {
		t.Errorf("everyone: %+v, %v", all, err)
	}

	// Bad lines are refused whole: nothing of the record is stored.
	for _, bad := range [][]chat.HostUsage{
		{{Host: ""}},
		{{Host: "a:443"}, {Host: "a:443"}},
		{{Host: "a:443", BytesSent: -1}},
		{{Host: "a\x00:443"}},
		{{Host: "\xff:443"}},
	} {
		err := s.RecordUsage(ctx, store.UsageRecord{UserID: "carol", Usage: chat.Usage{Egress: bad}})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if sum, _ := s.UsageSummary(ctx, "carol", time.Time{}); sum.Requests != 0 {
		t.Error("a refused record was stored")
	}
	var many []chat.HostUsage
	for i := range 600 {
		many = append(many, chat.HostUsage{Host: fmt.Sprintf("h%03d.test:443", i), Requests: 1})
	}
	if err := s.RecordUsage(ctx, store.UsageRecord{UserID: "dan", Usage: chat.Usage{Egress: many}}); err != nil {
		t.Fatal(err)
	}
	if sum, _ := s.UsageSummary(ctx, "dan", time.Time{}); !reflect.DeepEqual(sum.Usage.Egress, many) {
		t.Errorf("600 hosts came back as %d", len(sum.Usage.Egress))
	}
}
