#!/usr/bin/env bash
# Stages Debian 12's Open MPI (4.1.4, with its external PMIx 4.2) into a
# relocatable folder DEST, for a machine without Open MPI (the GPU machine:
# Ubuntu 24.04, glibc 2.39): mpirun/orterun, orted, ompi_info, libmpi and
# the ORTE/OPAL/PMIx libraries, the MCA components (Open MPI's and PMIx's),
# hwloc's PCI plugin, the help and parameter files, and every library they
# need (ldd, transitively) except glibc's own (libc6's files: libc, libm,
# libpthread, libdl, librt, ld-linux, ...), which the target has; plus
# bench/peers/mpi_sendrecv_pingpong.c built with mpicc -O2. Installs
# openmpi-bin and libopenmpi-dev first if missing (apt-get, as root).
#
#   bash bench/gpu/stage-openmpi.sh DEST [--slim]
#   # on the target, DEST anywhere (bash; from sh: OMPI_STAGE=DEST . DEST/env.sh):
#   . DEST/env.sh
#   mpirun --allow-run-as-root -np 2 --bind-to none --mca btl self,tcp \
#       DEST/mpi_sendrecv_pingpong --sizes 8,4096
#
# What relocating it needed (DEST/env.sh sets all of it from its own path;
# verified with Debian's Open MPI files hidden, in a mount namespace):
# - PATH=DEST/bin (mpirun, and orted, which the launch agent runs by name)
#   and LD_LIBRARY_PATH=DEST/lib (the RUNPATHs name Debian's directory).
# - OPAL_PKGLIBDIR=DEST/lib/openmpi, the components: without it mpirun finds
#   none and fails. OPAL_SYSCONFDIR=DEST/etc, else Debian's /etc/openmpi
#   (outside the /usr prefix) is looked for and the carried
#   openmpi-mca-params.conf, which turns openib/ofi/ucx off, is not read.
#   OPAL_PKGDATADIR=DEST/share/openmpi, the help texts. OPAL_PREFIX,
#   OPAL_LIBDIR and the other OPAL_*DIR for consistency.
# - PMIx (its own install paths): PMIX_PKGLIBDIR or
#   PMIX_MCA_mca_base_component_path (both set) = DEST/lib/pmix, as Debian's
#   pmix-mca-params.conf names its absolute plugin directory (not carried);
#   PMIX_SYSCONFDIR, PMIX_PKGDATADIR, PMIX_PREFIX likewise.
# - HWLOC_PLUGINS_PATH=DEST/lib/hwloc (not the target's hwloc plugins).
# The remote side needs the same environment: an agent that forks locally
# (`ip netns exec NS sh -c "$*"`, bench/tcp-netns.sh) passes mpirun's own;
# one that starts orted in a bare environment (ssh) must source env.sh
# first: sh -c "OMPI_STAGE=DEST . DEST/env.sh; $*" (verified too).
# Size (Debian 12, Open MPI 4.1.4-3+b1): du -sh DEST = 18M with all
# components; 11M with --slim, which leaves out the components Debian's
# openmpi-mca-params.conf disables (openib, ofi, uct, ucx), those only
# OpenSHMEM uses, and the PSM MTLs, with their libraries (libfabric, UCX,
# verbs, PSM, liboshmem). Nothing needs libstdc++. No symbolic links.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST=${1:?usage: stage-openmpi.sh DEST [--slim]}
SLIM=0; [ "${2:-}" = --slim ] && SLIM=1

# Open MPI and its compiler wrapper.
missing=()
for p in openmpi-bin libopenmpi-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${missing[@]}" \
        || { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
fi

MA=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
ML=/usr/lib/$MA
OMPI_PKGLIB=$(ompi_info --path pkglibdir --parsable | sed 's/^path:pkglibdir://')
PMIX_DIR=$(ls -d "$ML"/pmix*/lib/pmix | head -1)   # .../pmix2/lib/pmix
PMIX_SHARE=$(dirname "$(dirname "$PMIX_DIR")")/share/pmix
[ -d "$OMPI_PKGLIB" ] && [ -d "$PMIX_DIR" ] || { echo "stage-openmpi.sh: no Open MPI/PMIx components found" >&2; exit 1; }

mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
rm -rf "$DEST"/bin "$DEST"/lib "$DEST"/share "$DEST"/etc
mkdir -p "$DEST"/bin "$DEST"/lib/openmpi "$DEST"/lib/pmix "$DEST"/lib/hwloc \
         "$DEST"/share/openmpi "$DEST"/share/pmix "$DEST"/etc

# The program.
mpicc -O2 -o "$DEST/mpi_sendrecv_pingpong" "$ROOT/bench/peers/mpi_sendrecv_pingpong.c"

# Executables: copies, not links (mpirun and mpiexec are orterun).
for b in orterun orted ompi_info; do cp "$(readlink -f "/usr/bin/$b")" "$DEST/bin/$b"; done
cp "$DEST/bin/orterun" "$DEST/bin/mpirun"
cp "$DEST/bin/orterun" "$DEST/bin/mpiexec"

# Components. --slim: not those Debian's openmpi-mca-params.conf disables,
# nor OpenSHMEM's, nor PSM's (their libraries are most of the size).
skip='^$'
[ $SLIM = 1 ] && skip='^mca_(btl_(openib|ofi|uct)|mtl_(ofi|psm|psm2)|pml_ucx|osc_ucx|atomic_|memheap_|scoll_|spml_|sshmem_)'
for f in "$OMPI_PKGLIB"/*.so; do
    basename "$f" | grep -Eq "$skip" || cp "$f" "$DEST/lib/openmpi/"
done
cp "$PMIX_DIR"/*.so "$DEST/lib/pmix/"
[ -e "$ML/hwloc/hwloc_pci.so" ] && cp "$ML/hwloc/hwloc_pci.so" "$DEST/lib/hwloc/"

# Every library these need, under its soname, but glibc's.
glibc=" $(dpkg -L libc6 | grep -E '/[^/]+\.so[.0-9]*$' | xargs -n1 basename | tr '\n' ' ') "
while :; do
    added=0
    while read -r name path; do
        case "$glibc" in *" $name "*) continue ;; esac
        [ "$path" = "not" ] && { echo "stage-openmpi.sh: $name not found" >&2; exit 1; }
        [ -e "$DEST/lib/$name" ] && continue
        cp "$(readlink -f "$path")" "$DEST/lib/$name"; added=1
    done < <(find "$DEST" -type f \( -name '*.so*' -o -perm -u+x \) -exec ldd {} + 2>/dev/null \
             | awk '$2 == "=>" && $3 != "" {print $1, $3}' | sort -u)
    [ $added = 1 ] || break
done

# Help and parameter files: not the compiler wrappers' data, docs or headers.
cp -r /usr/share/openmpi/. "$DEST/share/openmpi/"
rm -f "$DEST"/share/openmpi/*-wrapper-data.txt "$DEST"/share/openmpi/*.supp
[ -d "$PMIX_SHARE" ] && cp "$PMIX_SHARE"/help-*.txt "$DEST/share/pmix/"
cp /etc/openmpi/* "$DEST/etc/"

cat > "$DEST/env.sh" <<'EOF'
# Source this to use the Open MPI staged here by bench/gpu/stage-openmpi.sh:
#   bash: . DIR/env.sh        sh: OMPI_STAGE=DIR . DIR/env.sh
if [ -n "${BASH_SOURCE:-}" ]; then
    OMPI_STAGE=$(cd "$(dirname "$BASH_SOURCE")" && pwd)
elif [ -n "${OMPI_STAGE:-}" ] && [ -f "$OMPI_STAGE/env.sh" ]; then
    OMPI_STAGE=$(cd "$OMPI_STAGE" && pwd)
else
    echo "env.sh: source it from bash, or set OMPI_STAGE to its folder" >&2
    return 1 2>/dev/null || exit 1
fi
export OMPI_STAGE
export OPAL_PREFIX="$OMPI_STAGE" OPAL_EXEC_PREFIX="$OMPI_STAGE"
export OPAL_BINDIR="$OMPI_STAGE/bin" OPAL_LIBDIR="$OMPI_STAGE/lib"
export OPAL_PKGLIBDIR="$OMPI_STAGE/lib/openmpi"
export OPAL_DATAROOTDIR="$OMPI_STAGE/share" OPAL_DATADIR="$OMPI_STAGE/share"
export OPAL_PKGDATADIR="$OMPI_STAGE/share/openmpi" OPAL_SYSCONFDIR="$OMPI_STAGE/etc"
export PMIX_PREFIX="$OMPI_STAGE" PMIX_LIBDIR="$OMPI_STAGE/lib"
export PMIX_PKGLIBDIR="$OMPI_STAGE/lib/pmix" PMIX_PKGDATADIR="$OMPI_STAGE/share/pmix"
export PMIX_DATAROOTDIR="$OMPI_STAGE/share" PMIX_DATADIR="$OMPI_STAGE/share"
export PMIX_SYSCONFDIR="$OMPI_STAGE/etc"
export PMIX_MCA_mca_base_component_path="$OMPI_STAGE/lib/pmix"
export HWLOC_PLUGINS_PATH="$OMPI_STAGE/lib/hwloc"
export PATH="$OMPI_STAGE/bin:$PATH"
export LD_LIBRARY_PATH="$OMPI_STAGE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF

echo "staged Open MPI $(dpkg-query -W -f='${Version}' openmpi-bin) in $DEST: $(du -sh "$DEST" | cut -f1)"
