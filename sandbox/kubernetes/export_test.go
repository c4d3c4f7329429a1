package kubernetes

// StopHeartbeat ends the runtime's lease renewals as a crash would: the
// lease stays, unrenewed.
func (r *Runtime) StopHeartbeat() {
	r.lease.mu.Lock()
	cancel := r.lease.cancel
	r.lease.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// LeaseName is the name of the lease of run.
func LeaseName(run string) string { return leaseName(run) }
