package jsapi

import (
	"slices"

	"github.com/dop251/goja"
)

// lazyObject is a JS object whose members are made on first access. Each
// native function costs allocations and a call starts a fresh runtime, so
// the ctx API builds only what a hook touches. To scripts it behaves like
// an ordinary object: Object.keys lists every member, and a hook may add,
// overwrite or delete properties.
type lazyObject struct {
	keys  []string
	build func(key string) goja.Value
	vals  map[string]goja.Value
	added []string
	gone  map[string]bool
}

var _ goja.DynamicObject = (*lazyObject)(nil)

func (c *call) newLazy(keys []string, build func(key string) goja.Value) *goja.Object {
	return c.vm.NewDynamicObject(&lazyObject{keys: keys, build: build})
}

func (l *lazyObject) declared(key string) bool {
	return !l.gone[key] && slices.Contains(l.keys, key)
}

// Get implements goja.DynamicObject.
func (l *lazyObject) Get(key string) goja.Value {
	if v, ok := l.vals[key]; ok {
		return v
	}
	if !l.declared(key) {
		return nil
	}
	v := l.build(key)
	if l.vals == nil {
		l.vals = make(map[string]goja.Value, 4)
	}
	l.vals[key] = v
	return v
}

// Set implements goja.DynamicObject.
func (l *lazyObject) Set(key string, val goja.Value) bool {
	if l.vals == nil {
		l.vals = make(map[string]goja.Value, 4)
	}
	if !l.declared(key) && !slices.Contains(l.added, key) {
		l.added = append(l.added, key)
	}
	if l.gone[key] {
		delete(l.gone, key)
	}
	l.vals[key] = val
	return true
}

// Has implements goja.DynamicObject.
func (l *lazyObject) Has(key string) bool {
	if _, ok := l.vals[key]; ok {
		return true
	}
	return l.declared(key)
}

// Delete implements goja.DynamicObject.
func (l *lazyObject) Delete(key string) bool {
	delete(l.vals, key)
	if i := slices.Index(l.added, key); i >= 0 {
		l.added = slices.Delete(l.added, i, i+1)
	}
	if slices.Contains(l.keys, key) {
		if l.gone == nil {
			l.gone = map[string]bool{}
		}
		l.gone[key] = true
	}
	return true
}

// Keys implements goja.DynamicObject.
func (l *lazyObject) Keys() []string {
	out := make([]string, 0, len(l.keys)+len(l.added))
	for _, k := range l.keys {
		if !l.gone[k] {
			out = append(out, k)
		}
	}
	return append(out, l.added...)
}
