package testrun

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/pipeline"
)

// Connectors lists the connectors a run names (--connector, the cases'
// options.connector, their simulators' and judges'), sorted, and checks
// that the app defines them.
func Connectors(app *assistant.App, suites []*Suite, override string) ([]string, error) {
	set := map[string]bool{}
	add := func(id string) {
		if id != "" {
			set[id] = true
		}
	}
	add(override)
	addAsserts := func(as Assertions) {
		for _, a := range as {
			if a.Options != nil {
				add(a.Options.Connector)
			}
		}
	}
	for _, s := range suites {
		for _, c := range s.Cases {
			if c.Options != nil {
				add(c.Options.Connector)
			}
			if c.Simulator != nil && c.Simulator.Options != nil {
				add(c.Simulator.Options.Connector)
			}
			addAsserts(c.Assert)
			for _, cp := range c.Checkpoints {
				addAsserts(cp.Assert)
			}
		}
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		if _, ok := app.Connectors[id]; !ok {
			have := make([]string, 0, len(app.Connectors))
			for k := range app.Connectors {
				have = append(have, k)
			}
			sort.Strings(have)
			return nil, fmt.Errorf("connector %q does not exist (have: %s)", id, strings.Join(have, ", "))
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// AllowConnectors wraps an app source so that every assistant lets a
// request choose the connectors ids names, as if its connector_options
// listed them: what a test run from the command line needs to run the
// same cases against a scripted model in CI and a real one by hand. The
// server never uses it: there a run keeps each assistant's own rules.
func AllowConnectors(src pipeline.AppSource, ids []string) pipeline.AppSource {
	if len(ids) == 0 {
		return src
	}
	return &connectorApp{src: src, allow: ids}
}

type connectorApp struct {
	src   pipeline.AppSource
	allow []string

	mu     sync.Mutex
	from   *assistant.App
	cached *assistant.App
}

// Current returns the current app with the connectors allowed, made once
// per app the source gives (a reload makes a new one).
func (c *connectorApp) Current() *assistant.App {
	app := c.src.Current()
	c.mu.Lock()
	defer c.mu.Unlock()
	if app == c.from && c.cached != nil {
		return c.cached
	}
	cp := *app
	cp.Assistants = make(map[string]*assistant.Assistant, len(app.Assistants))
	yes := true
	for id, a := range app.Assistants {
		b := *a
		choice := &assistant.ConnectorChoice{Optional: &yes, Connectors: slices.Clone(c.allow)}
		if a.ConnectorOptions != nil {
			for _, id := range a.ConnectorOptions.Connectors {
				if !slices.Contains(choice.Connectors, id) {
					choice.Connectors = append(choice.Connectors, id)
				}
			}
		}
		b.ConnectorOptions = choice
		cp.Assistants[id] = &b
	}
	c.from, c.cached = app, &cp
	return c.cached
}
