package cluster

import (
	"context"
	"testing"
	"time"
)

// BenchmarkExec measures one exec of `true` in a running sandbox pod
// through the API server and the kubelet.
func BenchmarkExec(b *testing.B) {
	c := newClient(b)
	pod, _ := c.startPod(b, hardenedPod(sandboxImage(), workspace(b)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for b.Loop() {
		res, err := c.exec(ctx, pod.Name, nil, "true")
		if err != nil || res.code != 0 {
			b.Fatalf("exec true = %+v, %v", res, err)
		}
	}
}

// BenchmarkPodStart measures a hardened sandbox pod from create to
// Running; deleting it is not timed.
func BenchmarkPodStart(b *testing.B) {
	c := newClient(b)
	ws := workspace(b)
	for b.Loop() {
		pod, _ := c.startPod(b, hardenedPod(sandboxImage(), ws))
		b.StopTimer()
		c.deletePod(b, pod.Name)
		b.StartTimer()
	}
}
