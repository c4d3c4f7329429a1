package breaker

import "github.com/prometheus/client_golang/prometheus"

var (
	stateDesc = prometheus.NewDesc("agentbox_circuit_breaker_state",
		"Circuit breaker state per connector: 1 for the current state, 0 for the others.",
		[]string{"connector", "state"}, nil)
	openedDesc = prometheus.NewDesc("agentbox_circuit_breaker_opened_total",
		"How often a connector's circuit breaker opened.",
		[]string{"connector"}, nil)
	rejectedDesc = prometheus.NewDesc("agentbox_circuit_breaker_rejected_total",
		"Calls a connector's open circuit breaker refused (failed fast).",
		[]string{"connector"}, nil)
)

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- openedDesc
	ch <- rejectedDesc
}

// Collect implements prometheus.Collector: the state of every breaker made
// so far.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	for _, st := range s.Statuses() {
		for _, state := range States {
			v := 0.0
			if st.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, st.Name, string(state))
		}
		ch <- prometheus.MustNewConstMetric(openedDesc, prometheus.CounterValue, float64(st.Opened), st.Name)
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(st.Rejected), st.Name)
	}
}

var _ prometheus.Collector = (*Set)(nil)
