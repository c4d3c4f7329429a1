package pipeline

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/chat"
)

// Metrics are a pipeline's Prometheus metrics. Labels carry only names from
// the app (assistant and connector ids) and error codes, never user or chat
// ids, so their number stays bounded whatever clients send.
type Metrics struct {
	turns     *prometheus.CounterVec
	running   prometheus.Gauge
	waiting   prometheus.Gauge
	sandboxes prometheus.Gauge
	duration  *prometheus.HistogramVec
	phases    *prometheus.HistogramVec
	tokens    *prometheus.CounterVec
	cost      *prometheus.CounterVec
	rejects   *prometheus.CounterVec
	// checkpoints count the chats' checkpoints taken, their time and the
	// bytes they added to the store.
	checkpoints     prometheus.Counter
	checkpointTime  prometheus.Histogram
	checkpointAdded prometheus.Counter
	// pool is the warm pool: its ready sandboxes by assistant, their
	// memory, the sandboxes made, and the new chats of pooled assistants
	// by how they got their sandbox.
	poolReadyGauge *prometheus.GaugeVec
	poolPrimed     *prometheus.GaugeVec
	poolMemory     prometheus.Gauge
	poolMade       prometheus.Gauge
	poolClaims     *prometheus.CounterVec
}

// durationBuckets span a quick direct answer to a long agent run.
var durationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// NewMetrics makes a pipeline's metrics and registers them with reg (nil:
// not registered, for a pipeline nobody scrapes).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_turns_total",
			Help: `Finished turns by assistant and outcome ("ok" or the error code).`}, []string{"assistant", "outcome"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentbox_turns_running",
			Help: "Turns running now (admitted, holding their chat)."}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentbox_turns_waiting",
			Help: "Turns waiting now for their chat or for a sandbox slot."}),
		sandboxes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentbox_sandboxes_live",
			Help: "Sandboxes alive now."}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbox_turn_duration_seconds",
			Help: "Duration of finished turns, waits included.", Buckets: durationBuckets}, []string{"assistant"}),
		phases: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentbox_turn_phase_duration_seconds",
			Help:    "Duration of the phases of turns: chat_wait, sandbox_wait, sandbox_create, hook_create, execute, hook_next, sandbox_remove.",
			Buckets: durationBuckets}, []string{"phase"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_tokens_total",
			Help: "Model tokens of finished turns by assistant, connector and kind (input, output, cache_read, cache_creation)."},
			[]string{"assistant", "connector", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_cost_usd_total",
			Help: "Model cost in US dollars of finished turns, as the executors report it."}, []string{"assistant", "connector"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_limit_rejections_total",
			Help: "Turns, terminals and uploads refused by a limit: turns_per_user, terminals_per_user, chat_queue, chat_wait, sandboxes, workspaces_per_user, disk_per_user, uploads_per_user, uploads."}, []string{"limit"}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_checkpoints_total",
			Help: "Checkpoints taken of chats (after their turns)."}),
		checkpointTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentbox_checkpoint_duration_seconds",
			Help: "Time a chat's checkpoint took (files, memory, history).", Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}),
		checkpointAdded: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentbox_checkpoint_added_bytes_total",
			Help: "Bytes checkpoints added to the checkpoint store (new objects, compressed)."}),
		poolReadyGauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbox_pool_ready",
			Help: "Pooled sandboxes waiting for a new chat, by assistant (sandbox.pool)."}, []string{"assistant"}),
		poolPrimed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentbox_pool_primed",
			Help: "Pooled sandboxes waiting with their CLI started, by assistant."}, []string{"assistant"}),
		poolMemory: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentbox_pool_memory_bytes",
			Help: "Memory the pooled sandboxes hold, as last measured."}),
		poolMade: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentbox_pool_made",
			Help: "Pooled sandboxes made since the start."}),
		poolClaims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentbox_pool_claims_total",
			Help: `New chats of pooled assistants by how they got their sandbox: "warm" (claimed from the pool), "cold" (the pool had none), "dropped" (a pooled sandbox that failed its check, removed).`},
			[]string{"outcome"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.turns, m.running, m.waiting, m.sandboxes, m.duration, m.phases, m.tokens, m.cost, m.rejects,
			m.checkpoints, m.checkpointTime, m.checkpointAdded, m.poolReadyGauge, m.poolPrimed, m.poolMemory, m.poolMade, m.poolClaims} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	for _, o := range []string{"warm", "cold", "dropped"} {
		m.poolClaims.WithLabelValues(o)
	}
	for _, l := range []string{"turns_per_user", "terminals_per_user", "chat_queue", "chat_wait", "sandboxes", "workspaces_per_user", "disk_per_user", "uploads_per_user", "uploads"} {
		m.rejects.WithLabelValues(l) // present at 0 before the first refusal
	}
	return m, nil
}

// mustMetrics is NewMetrics for an unregistered set, which cannot fail.
func mustMetrics() *Metrics {
	m, err := NewMetrics(nil)
	if err != nil {
		panic(err)
	}
	return m
}

// poolReady sets the pool's gauges from its status.
func (m *Metrics) poolReady(st PoolStatus) {
	m.poolReadyGauge.Reset()
	m.poolPrimed.Reset()
	for _, a := range st.Assistants {
		m.poolReadyGauge.WithLabelValues(a.ID).Set(float64(a.Ready))
		m.poolPrimed.WithLabelValues(a.ID).Set(float64(a.Primed))
	}
	m.poolMemory.Set(float64(st.MemoryBytes))
	m.poolMade.Set(float64(st.Made))
}

func (m *Metrics) poolClaim(outcome string) { m.poolClaims.WithLabelValues(outcome).Inc() }

func (m *Metrics) rejected(limit string) { m.rejects.WithLabelValues(limit).Inc() }

// checkpointTaken records a checkpoint that took d and added bytes.
func (m *Metrics) checkpointTaken(d time.Duration, bytes int64) {
	m.checkpoints.Inc()
	m.checkpointTime.Observe(d.Seconds())
	m.checkpointAdded.Add(float64(bytes))
}

// phase observes the time since start as a phase of a turn.
func (m *Metrics) phase(name string, start time.Time) {
	m.phases.WithLabelValues(name).Observe(time.Since(start).Seconds())
}

// finished records a finished turn of assistantID ("" when the turn
// never got to an assistant of the app).
func (m *Metrics) finished(assistantID, connector string, u chat.Usage, err error, took time.Duration) {
	outcome := "ok"
	if err != nil {
		outcome = chat.AsError(err).Code
	}
	m.turns.WithLabelValues(assistantID, outcome).Inc()
	m.duration.WithLabelValues(assistantID).Observe(took.Seconds())
	if assistantID == "" {
		return
	}
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens,
		"cache_read": u.CacheReadTokens, "cache_creation": u.CacheCreationTokens} {
		if n > 0 {
			m.tokens.WithLabelValues(assistantID, connector, kind).Add(float64(n))
		}
	}
	if u.CostUSD > 0 {
		m.cost.WithLabelValues(assistantID, connector).Add(u.CostUSD)
	}
}
