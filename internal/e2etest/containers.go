package e2etest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// Container is one of agentbox's sandbox containers on the Docker engine.
type Container struct {
	// Name is the container's name.
	Name string
	// Chat is the chat it was created for (sandbox.LabelChat).
	Chat string
}

// Containers lists agentbox's containers (those labelled
// sandbox.LabelProduct): only the running ones unless all is set.
func Containers(all bool) ([]Container, error) {
	args := []string{"ps", "--filter", "label=" + sandbox.LabelProduct + "=" + docker.ProductLabelValue,
		"--format", `{{.Names}}	{{.Label "` + sandbox.LabelChat + `"}}`}
	if all {
		args = append(args, "-a")
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("docker ps: %w", err)
	}
	var cs []Container
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, chat, ok := strings.Cut(l, "\t"); ok {
			cs = append(cs, Container{Name: name, Chat: chat})
		}
	}
	return cs, nil
}

// ChatContainers lists the names of the containers of chatID, running
// or not.
func ChatContainers(t testing.TB, chatID string) []string {
	t.Helper()
	return containersOf(t, func(chat string) bool { return chat == chatID })
}

// PrefixContainers lists the names of the containers, running or not, of
// every chat whose id starts with prefix.
func PrefixContainers(t testing.TB, prefix string) []string {
	t.Helper()
	return containersOf(t, func(chat string) bool { return strings.HasPrefix(chat, prefix) })
}

func containersOf(t testing.TB, match func(chat string) bool) []string {
	t.Helper()
	cs, err := Containers(true)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		if match(c.Chat) {
			out = append(out, c.Name)
		}
	}
	return out
}

// NoContainers waits up to timeout for the containers of chatID to be
// gone, and fails the test, naming them, when some are left.
func NoContainers(t testing.TB, chatID string, timeout time.Duration) {
	t.Helper()
	waitGone(t, timeout, "chat "+chatID, func() []string { return ChatContainers(t, chatID) })
}

// NoPrefixContainers is NoContainers for every chat whose id starts with
// prefix.
func NoPrefixContainers(t testing.TB, prefix string, timeout time.Duration) {
	t.Helper()
	waitGone(t, timeout, "the chats "+prefix+"*", func() []string { return PrefixContainers(t, prefix) })
}

func waitGone(t testing.TB, timeout time.Duration, of string, list func() []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := list()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers of %s left after %s: %v", of, timeout, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// PeakContainers samples, until stop is closed, how many running
// containers have a chat id starting with prefix (or equal to it, when
// exact), and sends the most it saw at once.
func PeakContainers(prefix string, exact bool, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		most := 0
		for {
			if cs, err := Containers(false); err == nil {
				n := 0
				for _, c := range cs {
					if c.Chat == prefix || !exact && strings.HasPrefix(c.Chat, prefix) {
						n++
					}
				}
				most = max(most, n)
			}
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return out
}

// WaitUntil polls cond every 50ms until it holds, and fails the test when
// timeout passes first.
func WaitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
