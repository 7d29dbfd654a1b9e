package memstore

import "sync"

// put sets m[k] = v under mu: the body of every store's setter.
func put[K comparable, V any](mu *sync.Mutex, m map[K]V, k K, v V) {
	mu.Lock()
	defer mu.Unlock()
	m[k] = v
}

// get reads m[k] under mu: the body of every store's plain reader.
func get[K comparable, V any](mu *sync.Mutex, m map[K]V, k K) (V, bool) {
	mu.Lock()
	defer mu.Unlock()
	v, ok := m[k]
	return v, ok
}
