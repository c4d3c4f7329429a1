package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/internal/poolslot"
)

// This file is the one place that decides what a sandbox pod mounts and
// from where: the workspace, the memory-backed /tmp and home, the empty
// folders over the workspace's hidden ones, and the spec's extra mounts (the agentbox binary and the bridge's sockets, which
// the pipeline adds; with the bridge across the network, bridge.Gateway,
// there are no socket mounts).

// Volume names in the pod.
const (
	volWorkspace = "workspace"
	volTmp       = "tmp"
	volHome      = "home"
	volData      = "data" // the claim, with Storage.Claim
	volEmptyFile = "empty-file"
	volPoolRun   = "pool-run" // a pooled pod's sockets (pool.go)
)

// annotationEmpty is a pod annotation whose value is "": the content of
// the file a hidden file of the workspace shows (Spec.Hide).
const annotationEmpty = "dev.agentbox.empty"

// check says whether s is complete.
func (s Storage) check() error {
	switch {
	case s.Claim == "" && s.ClaimRoot != "":
		return fmt.Errorf("storage: claim_root %q without a claim", s.ClaimRoot)
	case s.Claim != "" && !filepath.IsAbs(s.ClaimRoot):
		return fmt.Errorf("storage: claim %q needs claim_root, the absolute path where this server mounts the same volume", s.Claim)
	}
	return nil
}

// volumes returns the pod's volumes and the sandbox container's mounts
// for spec, whose extra mounts CheckMounts has cleaned:
//
//   - hostPath storage (Storage.Claim empty): the workspace and every
//     extra mount are the server's own paths on the node, read-only unless
//     the mount is Writable (the bridge's sockets). This is right when the
//     server runs on the node (a single-node cluster): elsewhere the node
//     has no such files.
//   - claim storage: the workspace is the claim's subPath under
//     Storage.ClaimRoot; extra mounts under ClaimRoot come from the claim
//     too, and any other is an error, as is a Unix socket (it cannot be
//     connected to across nodes).
//
// /tmp and home are memory-backed emptyDirs of TmpfsBytes each, which
// count against the pod's memory limit as Docker's tmpfs do.
//
// A pooled pod (slot set) has, with hostPath storage only, the slot's ws
// and run folders at /workspace and sandbox.PoolSocketDir (read-only),
// with HostToContainer propagation: the claim's mounts on the host (the
// workspace, the bridge's sockets) reach them.
func (r *Runtime) volumes(spec sandbox.Spec, hidden []sandbox.Hidden, mounts []sandbox.Mount, slot poolslot.Slot) ([]corev1.Volume, []corev1.VolumeMount, error) {
	tmpSize := resource.NewQuantity(r.opts.TmpfsBytes, resource.BinarySI)
	vols := []corev1.Volume{
		{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmpSize}}},
		{Name: volHome, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmpSize}}},
	}
	vms := []corev1.VolumeMount{
		{Name: volTmp, MountPath: "/tmp"},
		{Name: volHome, MountPath: r.opts.Home},
	}
	// Hidden names of the workspace, read-only: an empty emptyDir over a
	// folder, over a file the empty file of a downward API volume (the
	// pod's annotationEmpty, which is ""). The runtime mounts the
	// workspace, their parent, first: CRI runtimes order mounts by depth.
	emptyFile := false
	for i, h := range hidden {
		if !h.Folder {
			emptyFile = true
			vms = append(vms, corev1.VolumeMount{Name: volEmptyFile, MountPath: h.Target, SubPath: "empty", ReadOnly: true})
			continue
		}
		name := fmt.Sprintf("hide-%d", i)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(4096, resource.BinarySI)}}})
		vms = append(vms, corev1.VolumeMount{Name: name, MountPath: h.Target, ReadOnly: true})
	}
	if emptyFile {
		vols = append(vols, corev1.Volume{Name: volEmptyFile, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "empty", FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.annotations['" + annotationEmpty + "']"}}}}}})
	}
	st := r.opts.Storage
	if slot != "" {
		if st.Claim != "" {
			return nil, nil, fmt.Errorf("%w: a pooled pod gets its workspace from the node (hostPath storage), not from claim %q", sandbox.ErrNotPoolable, st.Claim)
		}
		toContainer := corev1.MountPropagationHostToContainer
		vols = append(vols, hostPathVolume(volWorkspace, slot.WS(), corev1.HostPathDirectory), hostPathVolume(volPoolRun, slot.Run(), corev1.HostPathDirectory))
		vms = append(vms, corev1.VolumeMount{Name: volWorkspace, MountPath: sandbox.Workdir, MountPropagation: &toContainer},
			corev1.VolumeMount{Name: volPoolRun, MountPath: sandbox.PoolSocketDir, ReadOnly: true, MountPropagation: &toContainer})
	}
	if st.Claim == "" {
		if slot == "" {
			vols = append(vols, hostPathVolume(volWorkspace, spec.Workspace.Dir(), corev1.HostPathDirectory))
			vms = append(vms, corev1.VolumeMount{Name: volWorkspace, MountPath: sandbox.Workdir})
		}
		for i, m := range mounts {
			fi, err := os.Stat(m.Source)
			if err != nil {
				return nil, nil, fmt.Errorf("mount %q: %w", m.Source, err)
			}
			name := fmt.Sprintf("mount-%d", i)
			vols = append(vols, hostPathVolume(name, m.Source, hostPathType(fi.Mode())))
			vms = append(vms, corev1.VolumeMount{Name: name, MountPath: m.Target, ReadOnly: !m.Writable})
		}
		return vols, vms, nil
	}
	wsDir := spec.Workspace.Dir()
	sub, err := claimPath(st.ClaimRoot, wsDir)
	if err != nil {
		return nil, nil, fmt.Errorf("workspace %s cannot be mounted from claim %q: %w", wsDir, st.Claim, err)
	}
	if _, ok := mountPoint(wsDir); ok {
		return nil, nil, fmt.Errorf("workspace %s is a mount on this host (a loop-mounted disk image?), which pods mounting claim %q do not see: "+
			"with claim storage workspaces must be plain folders on the claim (agentbox serve then measures their disk limits instead of mounting images)", wsDir, st.Claim)
	}
	vols = append(vols, corev1.Volume{Name: volData, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: st.Claim}}})
	vms = append(vms, corev1.VolumeMount{Name: volData, MountPath: sandbox.Workdir, SubPath: sub})
	for _, m := range mounts {
		fi, err := os.Stat(m.Source)
		if err != nil {
			return nil, nil, fmt.Errorf("mount %q: %w", m.Source, err)
		}
		if fi.Mode()&os.ModeSocket != 0 {
			return nil, nil, fmt.Errorf("mount %q -> %q cannot be honoured with claim storage: a Unix socket cannot be reached from another node", m.Source, m.Target)
		}
		sub, err := claimPath(st.ClaimRoot, m.Source)
		if err != nil {
			return nil, nil, fmt.Errorf("mount %q -> %q cannot be honoured with claim storage (claim %q at %s): sandbox pods run on any node, which has only the claim's files: %w",
				m.Source, m.Target, st.Claim, st.ClaimRoot, err)
		}
		vms = append(vms, corev1.VolumeMount{Name: volData, MountPath: m.Target, SubPath: sub, ReadOnly: !m.Writable})
	}
	return vols, vms, nil
}

// claimPath is p relative to root, the claim's root as this server sees
// it; p must lie beneath root.
func claimPath(root, p string) (string, error) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", errors.New("it is not under claim_root " + root)
	}
	return rel, nil
}

func hostPathVolume(name, path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

// hostPathType is the hostPath type that makes the kubelet check the
// source is still what the server saw.
func hostPathType(m os.FileMode) corev1.HostPathType {
	switch {
	case m.IsDir():
		return corev1.HostPathDirectory
	case m&os.ModeSocket != 0:
		return corev1.HostPathSocket
	case m.IsRegular():
		return corev1.HostPathFile
	}
	return corev1.HostPathUnset
}

// mountPoint reports whether dir is a mount point on this host (its
// device differs from its parent's), with its stat.
func mountPoint(dir string) (syscall.Stat_t, bool) {
	var st, parent syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || syscall.Stat(filepath.Dir(dir), &parent) != nil {
		return st, false
	}
	return st, st.Dev != parent.Dev
}

// checkWorkspaceSeen makes sure the pod sees the workspace the server
// sees, when that is in doubt: with hostPath storage, a workspace that is
// a mount point here (a loop-mounted disk image, for a disk limit) is only
// what the pod gets if the node's mount namespace received that mount
// (the kubelet runs in this host's namespace, or the mount lies under a
// shared mount it is a slave of). Otherwise the pod would write into the
// folder under the mount, unseen and unlimited. One exec compares the
// device and inode of /workspace with the server's.
func (r *Runtime) checkWorkspaceSeen(ctx context.Context, pod, dir string) error {
	st, ok := mountPoint(dir)
	if !ok || r.opts.Storage.Claim != "" {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, min(r.opts.CallTimeout, 10*time.Second))
	defer cancel()
	out, err := r.run1(cctx, pod, []string{"stat", "-c", "%d %i", sandbox.Workdir}, nil)
	if err != nil {
		return ctx.Err() // nil: no stat(1) in the image, nothing to compare with
	}
	if want := fmt.Sprintf("%d %d", st.Dev, st.Ino); strings.TrimSpace(out) != want {
		return fmt.Errorf("the pod does not see the workspace's own file system mounted at %s (device and inode %s in the pod, %s here): "+
			"the node's mount namespace did not receive the mount; run the server where the kubelet sees its mounts, keep data_root under a shared mount "+
			"(on the local cluster of `make cluster`: .cache/cluster/shared), or use workspace_claim", dir, strings.TrimSpace(out), want)
	}
	return nil
}
