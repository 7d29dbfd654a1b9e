package memstore

import "sync"

// put sets m[k] = v under mu: the body of every store's setter.
func put[K comparable, V any](mu *sync.Mutex, m map[K]V, k K, v V) {
	mu.Lock()
	defer mu.Unlock()
	m[k] = v
}
