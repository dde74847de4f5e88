package ratelimit

// TryTake takes a token of class c if one is there now, without waiting and
// without jumping ahead of callers already waiting: the tests' way to look
// into a bucket. It is not part of the product's API: it reports no answer,
// so on an adaptive bucket starting slowly (which lets tokens out only as
// EC2 answers) it would take the one token out and nothing would release
// more.
func (l *Limiter) TryTake(c Class) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketLocked(c, l.clock.Now())
	if b.tokens < 1 || b.pace != nil {
		// A paced bucket lets one call out at a time, through Acquire.
		return false
	}
	b.tokens--
	b.stats.Taken++
	return true
}
