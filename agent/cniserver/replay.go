package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/allotnet/allot/cni/delqueue"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// staleTempAge is how old a half-written queue file must be before replay
// removes it; younger ones may belong to a plugin writing right now.
const staleTempAge = 10 * time.Minute

// ReplayReport says what one pass over the DEL queue did.
type ReplayReport struct {
	// Applied are the DELs the backend accepted; their files are removed.
	Applied []Attachment
	// Failed counts DELs the backend refused; their files stay for the next
	// pass.
	Failed int
	// Corrupt are the files that could not be read, now moved aside (their
	// new paths).
	Corrupt []string
}

// ReplayDelQueue applies every DEL the plugin queued in dir while the agent
// was unreachable, oldest first, and removes each file once its DEL is
// applied. The agent calls it on start, before serving the socket, and
// periodically after. A corrupt file is logged and moved aside, never
// replayed and never fatal. The returned error is only for a queue that
// cannot be read at all or a context that ended.
//
// Each DEL carries its queue time (Request.QueuedAt) so the backend can
// refuse to remove an attachment recorded after the DEL was queued.
func ReplayDelQueue(ctx context.Context, dir string, b Backend, log *slog.Logger) (ReplayReport, error) {
	if log == nil {
		log = slog.Default()
	}
	var rep ReplayReport
	if err := delqueue.RemoveStaleTemps(dir, staleTempAge, time.Now()); err != nil {
		log.Warn("del queue: cannot remove stale temporary files", "dir", dir, "err", err)
	}
	paths, err := delqueue.List(dir)
	if err != nil {
		return rep, fmt.Errorf("replay del queue: %w", err)
	}
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("replay del queue: %w", err)
		}
		e, err := delqueue.Read(p)
		if errors.Is(err, delqueue.ErrCorrupt) {
			rep.Corrupt = append(rep.Corrupt, moveAside(log, p, err)...)
			continue
		}
		if err != nil {
			// Unreadable for another reason (permissions, vanished under a
			// concurrent replay): leave it for the next pass.
			log.Warn("del queue: cannot read entry", "path", p, "err", err)
			rep.Failed++
			continue
		}
		req, err := requestFromProto("del", &allotv1.CNIRequest{
			Attachment: &allotv1.Attachment{Network: e.Network, ContainerId: e.ContainerID, Ifname: e.IfName},
			Netns:      e.NetNS, CniVersion: e.CNIVersion, PodNamespace: e.PodNamespace, PodName: e.PodName,
		})
		if err != nil {
			// A key the server would refuse: no DEL from the plugin could
			// carry it, so the file is not one of the plugin's.
			rep.Corrupt = append(rep.Corrupt, moveAside(log, p, err)...)
			continue
		}
		req.QueuedAt = e.QueuedAt
		if err := b.Del(ctx, req); err != nil {
			log.Warn("del queue: replayed del failed; will retry", "attachment", req.Attachment.String(), "path", p, "err", err)
			rep.Failed++
			continue
		}
		if err := delqueue.Remove(p); err != nil {
			// Applied but still on disk: the next pass applies it again,
			// which an idempotent DEL allows.
			log.Warn("del queue: applied entry not removed", "path", p, "err", err)
		}
		log.Info("del queue: replayed del", "attachment", req.Attachment.String(), "queuedAt", e.QueuedAt)
		rep.Applied = append(rep.Applied, req.Attachment)
	}
	return rep, nil
}

// moveAside moves a corrupt entry out of the queue and returns its new path
// (none if it could not be moved; the next pass tries again).
func moveAside(log *slog.Logger, path string, why error) []string {
	moved, err := delqueue.MoveAside(path)
	if err != nil {
		log.Error("del queue: corrupt entry cannot be moved aside", "path", path, "err", why, "moveErr", err)
		return nil
	}
	log.Error("del queue: corrupt entry moved aside", "path", moved, "err", why)
	return []string{moved}
}
