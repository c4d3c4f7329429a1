package pipeline

import (
	"sync"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/jsapi"
)

// HookCache compiles each assistant's hooks once. Entries are keyed by the
// loaded *assistant.Assistant, so a reload (new pointers) compiles afresh;
// Prune drops the entries of assistants an app no longer has. A server
// shares one HookCache between the app's reload check and the Pipeline so
// hooks are compiled once per load. The zero value is ready; it is safe for
// concurrent use.
type HookCache struct {
	mu    sync.Mutex
	app   *assistant.App
	hooks map[*assistant.Assistant]*hookEntry
}

type hookEntry struct {
	once  sync.Once
	hooks *jsapi.Hooks
	err   error
}

// Get returns a's compiled hooks (nil without hook source), compiling them
// on first use. A compile error is returned on every call.
func (c *HookCache) Get(a *assistant.Assistant) (*jsapi.Hooks, error) {
	if a.Hooks == "" {
		return nil, nil
	}
	c.mu.Lock()
	if c.hooks == nil {
		c.hooks = map[*assistant.Assistant]*hookEntry{}
	}
	e, ok := c.hooks[a]
	if !ok {
		e = &hookEntry{}
		c.hooks[a] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.hooks, e.err = jsapi.Load(a) })
	return e.hooks, e.err
}

// Prune drops the entries of assistants that are not in app.
func (c *HookCache) Prune(app *assistant.App) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.app == app {
		return
	}
	c.app = app
	live := make(map[*assistant.Assistant]bool, len(app.Assistants))
	for _, a := range app.Assistants {
		live[a] = true
	}
	for a := range c.hooks {
		if !live[a] {
			delete(c.hooks, a)
		}
	}
}
