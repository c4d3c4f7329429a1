package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/sandbox"
)

// usageInterval is how often a server measures its data root for GET
// /metrics. A measurement walks the data root (a du), so it is not done
// per scrape; the per-workspace disk limit, not this metric, is what
// stops a workspace filling the disk.
const usageInterval = time.Minute

// usageMetrics exports the data root's disk usage (what `agentbox
// workspaces list` prints at its end) as gauges, from the last
// measurement a background loop made.
type usageMetrics struct {
	ws   *sandbox.Workspaces
	log  *slog.Logger
	last atomic.Pointer[usageSample]

	stop context.CancelFunc
	done sync.WaitGroup
}

type usageSample struct {
	u  *sandbox.DataUsage
	at time.Time
}

// startUsageMetrics registers the gauges with reg and measures once now
// and then every interval until Close.
func startUsageMetrics(ctx context.Context, reg prometheus.Registerer, ws *sandbox.Workspaces, interval time.Duration, logger *slog.Logger) (*usageMetrics, error) {
	m := &usageMetrics{ws: ws, log: logger}
	gauge := func(name, help string, f func(*sandbox.DataUsage) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if s := m.last.Load(); s != nil {
				return f(s.u)
			}
			return 0
		})
	}
	collectors := []prometheus.Collector{
		gauge("agentbox_data_root_bytes", "What the data root takes on disk: workspaces, their disk images at their allocated size, the store.",
			func(u *sandbox.DataUsage) float64 { return float64(u.Bytes) }),
		gauge("agentbox_workspaces", "Workspaces in the data root.",
			func(u *sandbox.DataUsage) float64 { return float64(u.Workspaces) }),
		gauge("agentbox_workspace_bytes", "What the workspaces' files take, summed.",
			func(u *sandbox.DataUsage) float64 { return float64(u.WorkspaceBytes) }),
		// Counted at each scrape (the mount table and sysfs, no walk).
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbox_workspaces_mounted",
			Help: "Workspace disk images mounted now: in use by a turn or terminal, kept mounted between a chat's turns, or left by a process that died."},
			func() float64 { return float64(ws.DiskMounts().Mounted) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbox_workspace_loop_devices",
			Help: "Loop devices attached to workspace disk images now: one per mounted image, plus one per image a removed sandbox's mount namespace still holds."},
			func() float64 { return float64(ws.DiskMounts().LoopDevices) }),
		gauge("agentbox_data_root_filesystem_size_bytes", "Size of the host filesystem holding the data root.",
			func(u *sandbox.DataUsage) float64 { return float64(u.FSSize) }),
		gauge("agentbox_data_root_filesystem_avail_bytes", "Space left for agentbox on the host filesystem holding the data root.",
			func(u *sandbox.DataUsage) float64 { return float64(u.FSAvail) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbox_data_root_measured_timestamp_seconds",
			Help: "When the data root usage above was measured (Unix time; 0 before the first measurement)."}, func() float64 {
			if s := m.last.Load(); s != nil {
				return float64(s.at.UnixMilli()) / 1000
			}
			return 0
		}),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	ctx, m.stop = context.WithCancel(ctx)
	m.done.Add(1)
	go m.loop(ctx, interval)
	return m, nil
}

func (m *usageMetrics) loop(ctx context.Context, interval time.Duration) {
	defer m.done.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		m.measure(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *usageMetrics) measure(ctx context.Context) {
	u, err := m.ws.Usage(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("data root usage for metrics", "err", err)
		}
		return
	}
	m.last.Store(&usageSample{u: u, at: time.Now()})
}

// Close stops the measurements and waits for one under way.
func (m *usageMetrics) Close(context.Context) error {
	m.stop()
	m.done.Wait()
	return nil
}
