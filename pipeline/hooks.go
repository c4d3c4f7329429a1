package pipeline

import (
	"sync"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/jsapi"
)

// HookCache holds the JavaScript of each loaded app (jsapi.Scripts): its
// hooks, compiled once per assistant, and its scripts, which the hooks'
// Process calls and process MCP servers run. Entries are keyed by the
// loaded *assistant.App, so a reload (a new App) compiles afresh; Prune
// drops the apps that are not current. A server shares one HookCache
// between the app's reload check and the Pipeline so hooks are compiled
// once per load. The zero value is ready; it is safe for concurrent use.
type HookCache struct {
	mu   sync.Mutex
	apps map[*assistant.App]*jsapi.Scripts
}

// Scripts returns app's JavaScript, made on first use.
func (c *HookCache) Scripts(app *assistant.App) *jsapi.Scripts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apps == nil {
		c.apps = map[*assistant.App]*jsapi.Scripts{}
	}
	s, ok := c.apps[app]
	if !ok {
		s = jsapi.NewScripts(app)
		c.apps[app] = s
	}
	return s
}

// Get returns a's compiled hooks (nil without hook source), compiling them
// on first use with app's scripts. A compile error is returned on every
// call.
func (c *HookCache) Get(app *assistant.App, a *assistant.Assistant) (*jsapi.Hooks, error) {
	if a.Hooks == "" {
		return nil, nil
	}
	return c.Scripts(app).Hooks(a)
}

// Prune drops the JavaScript of every app but app (the current one); turns
// of an older app keep what they already hold.
func (c *HookCache) Prune(app *assistant.App) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other := range c.apps {
		if other != app {
			delete(c.apps, other)
		}
	}
}
