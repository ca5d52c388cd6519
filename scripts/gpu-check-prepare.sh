#!/usr/bin/env bash
# gpu-check --prepare: packs into gpu-deps/ (git-ignored, repo root) every
# Debian 12 package the build needs beyond what a lent GPU machine has (no
# network there; PyTorch, nvcc, CMake and ninja are there; the distro is not
# Debian 12; g++ and pkg-config may be missing), so that the source tree plus
# gpu-deps/ build there. Run it here, on the Debian 12 machine that
# scripts/setup prepared:
#
#   scripts/gpu-check-prepare.sh            # = scripts/gpu-check --prepare
#   scripts/gpu-check-prepare.sh --selftest # configure+build+run a tiny CMake
#                                           # project against gpu-deps/ only
#   . scripts/gpu-check-prepare.sh          # as a library: defines
#                                           # gpu_check_prepare, gpu_check_prepare_selftest
#
# Then, on the GPU machine, from the repo root (gpu-deps/ carried along):
#   . gpu-deps/env.sh && cmake -S . -B build-gpu ...
#
# What lands in gpu-deps/:
#   prefix/usr/...   the packages, unpacked with dpkg -x (docs, man pages,
#                    locales and static archives that have a shared twin
#                    dropped), every path made relocatable: .pc files use
#                    ${pcfiledir}, CMake files ${CMAKE_CURRENT_LIST_DIR} /
#                    _IMPORT_PREFIX, symlinks are relative.
#   prefix/usr/lib/cmake/<Pkg>/  stubs that include the multiarch configs, so
#                    CMake finds them on a non-Debian distro too (it searches
#                    lib/x86_64-linux-gnu/cmake only where the compiler says
#                    the system is multiarch).
#   lib/             one symlink per SONAME of the libraries our -dev
#                    packages link (yaml-cpp, fmt, spdlog, zmq, muparser,
#                    CBC & co, hiredis, cpp-httplib): LD_LIBRARY_PATH.
#   lib-fallback/    the same for their dependencies (libsodium, OpenSSL,
#                    zlib, krb5, LAPACK, ...): env.sh exposes one of them only
#                    where the GPU machine has no library of that SONAME, so
#                    the system's own cmake, python, git ... keep theirs.
#   bin/pkg-config   a wrapper of Debian's pkgconf (FindPkgConfig needs a
#                    binary; env.sh sets PKG_CONFIG to it only where the
#                    machine has no pkg-config).
#   env.sh           source it from the repo root (exports listed in it).
#   manifest.json    packages, versions, size, date.
#
# The .debs are kept in $HYDROZOA_DEBS (default ~/.cache/hydrozoa/debs,
# outside the clone): a second run downloads nothing (and works offline).
# Knobs: GPU_DEPS_MAX_MIB (default 50), GPU_DEPS_DATASET=auto|yes|no (default
# auto: Fashion-MNIST goes in only if it fits the budget); for --selftest
# GPU_DEPS_SELFTEST_ISOLATE=0 (let CMake search the system too),
# GPU_DEPS_SELFTEST_JOBS (default 1), GPU_DEPS_SELFTEST_KEEP=1 (keep /tmp dir).
set -euo pipefail

# --- what is packed --------------------------------------------------------
# The -dev packages the CMake build finds (CMakeLists.txt; tests/ finds GTest;
# torch's ProcessGroupGloo.hpp includes gloo's headers), plus the -dev
# packages whose headers theirs include (cpp-httplib's httplib.h includes
# OpenSSL's, brotli's and zlib's; its .pc requires their .pc files).
GPU_DEPS_DEV_PACKAGES=(
  nlohmann-json3-dev libyaml-cpp-dev libfmt-dev libspdlog-dev libcli11-dev
  libzmq3-dev cppzmq-dev zlib1g-dev libmuparser-dev
  coinor-libcbc-dev coinor-libcgl-dev coinor-libclp-dev coinor-libosi-dev coinor-libcoinutils-dev
  libhiredis-dev libcpp-httplib-dev libssl-dev libbrotli-dev
  libgtest-dev libgmock-dev libgloo-dev
)
# The shared libraries of those -dev packages: "ours", always on LD_LIBRARY_PATH.
GPU_DEPS_RUNTIME_PACKAGES=(
  libyaml-cpp0.7 libfmt9 libspdlog1.10 libzmq5 libmuparser2v5
  coinor-libcbc3 coinor-libcgl1 coinor-libclp1 coinor-libosi1v5 coinor-libcoinutils3v5
  libhiredis0.14 libcpp-httplib0.11
)
# pkg-config for FindPkgConfig (its libpkgconf3 comes in through the closure).
GPU_DEPS_TOOL_PACKAGES=(pkgconf-bin)
GPU_DEPS_DATA_PACKAGE=dataset-fashion-mnist
# Everything else is found by the closure: each DT_NEEDED of each packed ELF
# file that is neither packed nor part of glibc / libstdc++ / libgcc is looked
# up here (ldconfig, dpkg -S) and its package added, until nothing is missing.
GPU_DEPS_BASE_SONAMES='^(libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
GPU_DEPS_MULTIARCH=x86_64-linux-gnu

gpu_prep_say() { echo "gpu-check --prepare: $*"; }
gpu_prep_warn() { echo "gpu-check --prepare: warning: $*" >&2; }
gpu_prep_die() { echo "gpu-check --prepare: error: $*" >&2; exit 1; }

# --- .debs: cache, then apt's own archive, then apt-get download -----------
# apt's candidate version and architecture of each package named (one
# apt-cache call: each costs about a second).
declare -gA GPU_PREP_VER=() GPU_PREP_ARCH=()
gpu_prep_resolve() {
  local line pkg=""
  while IFS= read -r line; do
    case "$line" in
      "Package: "*) pkg="${line#Package: }" ;;
      "Version: "*) [ -z "$pkg" ] || GPU_PREP_VER[$pkg]="${line#Version: }" ;;
      "Architecture: "*) [ -z "$pkg" ] || GPU_PREP_ARCH[$pkg]="${line#Architecture: }" ;;
      "") pkg="" ;;
    esac
  done < <(apt-cache show --no-all-versions "$@" 2>/dev/null || true)
}

# Prints the path of the cached .deb of package $1 (the candidate version;
# offline and not cached: the newest cached version, with a warning).
gpu_prep_deb_of() {
  local pkg="$1" cache="$2" ver arch file
  ver="${GPU_PREP_VER[$pkg]:-}" arch="${GPU_PREP_ARCH[$pkg]:-amd64}"
  if [ -z "$ver" ]; then
    local any
    any="$(ls -1 "$cache/${pkg}"_*.deb 2>/dev/null | sort -V | tail -1 || true)"
    [ -n "$any" ] || gpu_prep_die "apt knows no package $pkg and $cache has no .deb of it: run 'apt-get update' (network) or put ${pkg}_*.deb into $cache"
    gpu_prep_warn "apt knows no $pkg: using the cached $(basename "$any")"
    echo "$any"; return
  fi
  file="$cache/${pkg}_${ver//:/%3a}_${arch}.deb"
  if [ ! -s "$file" ] && [ -s "/var/cache/apt/archives/$(basename "$file")" ]; then
    cp "/var/cache/apt/archives/$(basename "$file")" "$file.tmp.$$" && mv "$file.tmp.$$" "$file"
  fi
  if [ ! -s "$file" ]; then
    gpu_prep_say "downloading $pkg $ver" >&2
    if ! (cd "$cache" && apt-get download -qq "$pkg=$ver" >/dev/null 2>"$cache/.apt-download.err"); then
      local any
      any="$(ls -1 "$cache/${pkg}"_*.deb 2>/dev/null | sort -V | tail -1 || true)"
      [ -n "$any" ] || gpu_prep_die "could not download $pkg=$ver ($(tr '\n' ' ' <"$cache/.apt-download.err")); fix the network or apt's sources, or put the .deb into $cache"
      gpu_prep_warn "could not download $pkg=$ver: using the cached $(basename "$any")"
      echo "$any"; return
    fi
  fi
  [ -s "$file" ] || gpu_prep_die "apt-get download left no $file"
  echo "$file"
}

gpu_prep_apt_ready() {
  local t
  for t in dpkg-deb apt-get readelf pkg-config perl realpath; do
    command -v "$t" >/dev/null ||
      gpu_prep_die "needs $t (dpkg, apt, binutils, pkg-config, perl, coreutils): run it on the Debian 12 machine scripts/setup prepared"
  done
  [ "$(. /etc/os-release 2>/dev/null; echo "${ID:-}:${VERSION_ID:-}")" = "debian:12" ] ||
    gpu_prep_warn "this is not Debian 12: the packages' versions are this distro's, not those scripts/setup installs"
  if ! apt-cache show --no-all-versions "${GPU_DEPS_DEV_PACKAGES[0]}" >/dev/null 2>&1; then
    gpu_prep_say "apt's package lists are empty: apt-get update (once)"
    local sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq || gpu_prep_warn "apt-get update failed: only cached .debs can be used"
  fi
}

# --- one package: unpack, merge /lib into /usr/lib, prune, relative links --
gpu_prep_unpack() {
  local deb="$1" dir="$2" d l t
  rm -rf "$dir"; mkdir -p "$dir"
  dpkg-deb -x "$deb" "$dir" || gpu_prep_die "dpkg-deb -x failed on $deb (a broken download? delete it and run again)"
  # Debian 12's packages still ship /lib/..., /bin/...: the merged-/usr
  # system reaches them through /lib -> usr/lib; the prefix merges them.
  for d in lib lib64 bin sbin; do
    if [ -d "$dir/$d" ] && [ ! -L "$dir/$d" ]; then
      mkdir -p "$dir/usr/$d"
      cp -a "$dir/$d/." "$dir/usr/$d/"
      rm -rf "${dir:?}/$d"
    fi
  done
  # What no build reads.
  rm -rf "${dir:?}"/usr/share/{doc,doc-base,man,info,locale,lintian,bug,bash-completion,menu,gdb,zsh,fish,aclocal}
  rm -rf "${dir:?}"/usr/lib/$GPU_DEPS_MULTIARCH/{engines-3,ossl-modules}  # OpenSSL's optional plugins (absolute paths compiled in)
  rm -rf "${dir:?}"/usr/share/coin/Data  # CBC/CLP's sample problems
  rm -rf "${dir:?}"/usr/lib/$GPU_DEPS_MULTIARCH/krb5/plugins  # krb5's optional preauth plugins
  rm -rf "${dir:?}"/etc "${dir:?}"/usr/lib/systemd "${dir:?}"/usr/sbin "${dir:?}"/usr/src  # usr/src/gtest: a link to googletest's sources
  # Absolute links -> relative ones, /lib/... read as /usr/lib/...
  while IFS= read -r -d '' l; do
    t="$(readlink "$l")"
    case "$t" in
      /*)
        case "$t" in /lib/*|/lib64/*|/bin/*|/sbin/*) t="/usr$t" ;; esac
        ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$dir$t")" "$l" ;;
    esac
  done < <(find "$dir" -type l -print0)
  # Links into what was pruned (docs, changelogs).
  find "$dir" -xtype l -path '*/share/*' -delete
  find "$dir" -depth -type d -empty -delete 2>/dev/null || true
  mkdir -p "$dir"
}

# The SONAMEs a file needs, one a line.
gpu_prep_needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
gpu_prep_soname() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
gpu_prep_is_elf() { [ -f "$1" ] && [ ! -L "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

# Which installed package holds the library of SONAME $1 ("" if none).
gpu_prep_pkg_of_soname() {
  local so="$1" p c
  p="$(ldconfig -p 2>/dev/null | awk -v n="$so" '$1==n && /x86-64/ {print $NF; exit}')"
  [ -n "$p" ] || { echo ""; return; }
  for c in "$p" "$(readlink -f "$p")" "${p/#\/usr\/lib\//\/lib\/}" "${p/#\/lib\//\/usr\/lib\/}"; do
    dpkg -S "$c" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1 && return
  done
  echo ""
}

# --- rewriting for relocation ----------------------------------------------
gpu_prep_fix_pc() {
  local prefix="$1" pc rel lib libdir
  while IFS= read -r -d '' pc; do
    rel="$(realpath -m --relative-to="$(dirname "$pc")" "$prefix/usr")"
    # /usr where a path starts (after =, a quote, a blank, -I or -L)
    perl -pi -e 's{(^|[=\s"\x27]|-I|-L)/usr(?=[/"\x27\s]|$)}{$1\$\{pcfiledir\}/'"$rel"'}g' "$pc"
    # A libdir whose libraries lie elsewhere (hiredis.pc says /usr/lib; they
    # lie in the multiarch folder): point it at the folder that has them.
    libdir="$(PKG_CONFIG_LIBDIR="$(dirname "$pc")" PKG_CONFIG_PATH="" pkg-config --variable=libdir "$(basename "$pc" .pc)" 2>/dev/null || true)"
    for lib in $(sed -n 's/^Libs:\(.*\)/\1/p' "$pc" | tr ' ' '\n' | sed -n 's/^-l//p'); do
      if [ -n "$libdir" ] && [ ! -e "$libdir/lib$lib.so" ] && [ -e "$prefix/usr/lib/$GPU_DEPS_MULTIARCH/lib$lib.so" ]; then
        gpu_prep_say "$(basename "$pc"): libdir has no lib$lib.so, pointed at lib/$GPU_DEPS_MULTIARCH"
        perl -pi -e 's{^libdir=.*}{libdir=\$\{pcfiledir\}/'"$(realpath -m --relative-to="$(dirname "$pc")" "$prefix/usr/lib/$GPU_DEPS_MULTIARCH")"'}' "$pc"
        break
      fi
    done
  done < <(find "$prefix" -name '*.pc' -type f -print0)
}

gpu_prep_fix_cmake() {
  local prefix="$1" f rel
  while IFS= read -r -d '' f; do
    # configure_package_config_file / install(EXPORT) add a block that puts
    # back the original /usr path when the file is reached through a /lib ->
    # /usr/lib link; in the prefix it can only do harm: drop it.
    perl -0pi -e 's{\n(?:#[^\n]*\n)*?[ \t]*get_filename_component\(_realCurr [^\n]*\n[ \t]*get_filename_component\(_realOrig "/usr[^\n]*\n[ \t]*if\(_realCurr STREQUAL _realOrig\)\n[^\n]*\n[ \t]*endif\(\)\n[ \t]*unset\(_realOrig\)\n[ \t]*unset\(_realCurr\)\n}{\n}g' "$f"
    if grep -q '"/usr' "$f"; then
      rel="$(realpath -m --relative-to="$(dirname "$f")" "$prefix/usr")"
      # HiredisConfig.cmake: HINTS "/usr/lib" means the multiarch folder.
      perl -pi -e 's{"/usr/lib"}{"/usr/lib/'"$GPU_DEPS_MULTIARCH"'"}g' "$f"
      perl -pi -e 's{"/usr(?=[/"])}{"\$\{CMAKE_CURRENT_LIST_DIR\}/'"$rel"'}g' "$f"
    fi
  done < <(find "$prefix" -name '*.cmake' -type f -print0)
}

# CMake searches <prefix>/lib/<arch>/cmake only where CMAKE_LIBRARY_ARCHITECTURE
# is set (a Debian-like compiler); <prefix>/lib/cmake always.
gpu_prep_cmake_stubs() {
  local prefix="$1" d name f
  for d in "$prefix/usr/lib/$GPU_DEPS_MULTIARCH/cmake"/*/; do
    [ -d "$d" ] || continue
    name="$(basename "$d")"
    [ -e "$prefix/usr/lib/cmake/$name" ] && continue
    mkdir -p "$prefix/usr/lib/cmake/$name"
    for f in "$d"*.cmake; do
      case "$(basename "$f")" in
        *Config.cmake|*-config.cmake|*ConfigVersion.cmake|*-config-version.cmake)
          printf '# gpu-deps: the multiarch copy, for distros where CMake does not look there\ninclude("${CMAKE_CURRENT_LIST_DIR}/../../%s/cmake/%s/%s")\n' \
            "$GPU_DEPS_MULTIARCH" "$name" "$(basename "$f")" >"$prefix/usr/lib/cmake/$name/$(basename "$f")" ;;
      esac
    done
  done
}

# --- env.sh and the pkg-config wrapper --------------------------------------
gpu_prep_write_env() {
  local out="$1" glibc="$2" glibcxx="$3"
  cat >"$out/bin/pkg-config" <<'EOF'
#!/bin/sh
# gpu-deps: Debian 12's pkgconf, run from the prefix (for machines with no pkg-config).
d="$(cd "$(dirname "$0")/.." && pwd)"
LD_LIBRARY_PATH="$d/lib-fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/prefix/usr/bin/pkgconf" "$@"
EOF
  chmod +x "$out/bin/pkg-config"
  cat >"$out/env.sh" <<EOF
# gpu-deps/env.sh (written by scripts/gpu-check-prepare.sh): source it from
# the repo root, in bash, before configuring/building with gpu-deps/:
#   . gpu-deps/env.sh
# Exports GPU_DEPS, CMAKE_PREFIX_PATH, CMAKE_LIBRARY_PATH, PKG_CONFIG_PATH,
# CPLUS_INCLUDE_PATH, C_INCLUDE_PATH, LD_LIBRARY_PATH, GPU_DEPS_FASHION_MNIST
# (if packed), and PKG_CONFIG where the machine has no pkg-config.
# Sourcing it twice adds nothing twice.
_gd="\$(cd "\$(dirname "\${BASH_SOURCE[0]:-\$PWD/gpu-deps/env.sh}")" && pwd)"
_gu="\$_gd/prefix/usr"
_gl="\$_gu/lib/$GPU_DEPS_MULTIARCH"
_gpu_deps_prepend() {  # VAR DIR...: DIRs in front of \$VAR, each once
  local v="\$1" i d cur; shift
  for ((i = \$#; i >= 1; i--)); do
    d="\${!i}"; cur="\${!v:-}"
    case ":\$cur:" in *":\$d:"*) ;; *) cur="\$d\${cur:+:\$cur}" ;; esac
    export "\$v=\$cur"
  done
}
export GPU_DEPS="\$_gd"
_gpu_deps_prepend CMAKE_PREFIX_PATH "\$_gu"
# find_library/find_path on a distro that is not multiarch (CMake does not
# look in lib/$GPU_DEPS_MULTIARCH there).
_gpu_deps_prepend CMAKE_LIBRARY_PATH "\$_gl"
_gpu_deps_prepend PKG_CONFIG_PATH "\$_gl/pkgconfig" "\$_gu/share/pkgconfig"
# Like Debian's /usr/include: searched after every -I and -isystem (gloo's
# headers, which torch includes, come from here; OpenSSL's configuration.h
# from the multiarch folder).
_gpu_deps_prepend CPLUS_INCLUDE_PATH "\$_gu/include" "\$_gu/include/$GPU_DEPS_MULTIARCH"
_gpu_deps_prepend C_INCLUDE_PATH "\$_gu/include" "\$_gu/include/$GPU_DEPS_MULTIARCH"
# Our libraries always; a dependency (OpenSSL, zlib, krb5, LAPACK, ...) only
# where this machine has no library of that SONAME: lib-missing/ is remade
# at each sourcing with links to those.
_gm="\$_gd/lib-missing"
if rm -rf "\$_gm" 2>/dev/null && mkdir -p "\$_gm" 2>/dev/null; then
  _gcache="\$( { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true; } | awk '/x86-64/ {print \$1}')"
  for _gf in "\$_gd"/lib-fallback/*; do
    [ -e "\$_gf" ] || continue
    _gs="\$(basename "\$_gf")"
    if printf '%s\n' "\$_gcache" | grep -qxF "\$_gs"; then continue; fi
    _gfound=""
    for _gdir in /lib/$GPU_DEPS_MULTIARCH /usr/lib/$GPU_DEPS_MULTIARCH /lib64 /usr/lib64; do
      [ -e "\$_gdir/\$_gs" ] && _gfound=1 && break
    done
    [ -n "\$_gfound" ] || ln -s "../lib-fallback/\$_gs" "\$_gm/\$_gs"
  done
  _gpu_deps_prepend LD_LIBRARY_PATH "\$_gd/lib" "\$_gm"
else
  echo "gpu-deps/env.sh: cannot write \$_gm: all packed dependencies go on LD_LIBRARY_PATH" >&2
  _gpu_deps_prepend LD_LIBRARY_PATH "\$_gd/lib" "\$_gd/lib-fallback"
fi
if ! command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG="\$_gd/bin/pkg-config"
fi
if [ -d "\$_gu/share/datasets/fashion-mnist" ]; then
  export GPU_DEPS_FASHION_MNIST="\$_gu/share/datasets/fashion-mnist"
fi
# The code reads Fashion-MNIST from /usr/share/datasets/fashion-mnist: as
# root, gpu_deps_link_dataset puts a link there to the packed copy.
gpu_deps_link_dataset() {
  [ -n "\${GPU_DEPS_FASHION_MNIST:-}" ] || { echo "gpu-deps/env.sh: Fashion-MNIST is not packed" >&2; return 1; }
  [ -e /usr/share/datasets/fashion-mnist ] && return 0
  mkdir -p /usr/share/datasets && ln -s "\$GPU_DEPS_FASHION_MNIST" /usr/share/datasets/fashion-mnist
}
# The packed libraries were built for glibc >= $glibc and libstdc++ >= $glibcxx.
_gv="\$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print \$2}')"
if [ -n "\$_gv" ] && [ "\$(printf '%s\n%s\n' "$glibc" "\$_gv" | sort -V | head -1)" != "$glibc" ]; then
  echo "gpu-deps/env.sh: warning: glibc \$_gv here, the packed libraries need $glibc" >&2
fi
unset _gd _gu _gl _gm _gcache _gf _gs _gfound _gdir _gv
EOF
}

# --- the whole run -----------------------------------------------------------
gpu_check_prepare() {
  local root cache max_mib dataset_mode
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  cache="${HYDROZOA_DEBS:-$HOME/.cache/hydrozoa/debs}"
  max_mib="${GPU_DEPS_MAX_MIB:-50}"
  dataset_mode="${GPU_DEPS_DATASET:-auto}"
  case "$dataset_mode" in auto|yes|no) ;; *) gpu_prep_die "GPU_DEPS_DATASET is '$dataset_mode': use auto, yes or no" ;; esac
  mkdir -p "$cache"
  gpu_prep_apt_ready
  local started=$SECONDS
  # Built beside the cache (outside the clone), moved in at the end: an
  # interrupted run leaves the last good gpu-deps/ alone.
  local stage
  stage="$(mktemp -d "$cache/../gpu-deps-stage.XXXXXX")"
  trap 'rm -rf "'"$stage"'"' EXIT
  local prefix="$stage/out/prefix" pkgs="$stage/pkgs"
  mkdir -p "$prefix" "$pkgs" "$stage/out/bin" "$stage/out/lib" "$stage/out/lib-fallback"

  declare -A role=() debof=()
  local p
  for p in "${GPU_DEPS_DEV_PACKAGES[@]}"; do role[$p]=dev; done
  for p in "${GPU_DEPS_RUNTIME_PACKAGES[@]}"; do role[$p]=runtime; done
  for p in "${GPU_DEPS_TOOL_PACKAGES[@]}"; do role[$p]=tool; done
  local -a queue=("${GPU_DEPS_DEV_PACKAGES[@]}" "${GPU_DEPS_RUNTIME_PACKAGES[@]}" "${GPU_DEPS_TOOL_PACKAGES[@]}")
  local round=0 f so need
  while ((${#queue[@]})); do
    round=$((round + 1))
    ((round <= 10)) || gpu_prep_die "the library closure did not settle after 10 rounds (still missing: ${queue[*]})"
    gpu_prep_say "round $round: ${#queue[@]} package(s): ${queue[*]}"
    gpu_prep_resolve "${queue[@]}"
    for p in "${queue[@]}"; do
      debof[$p]="$(gpu_prep_deb_of "$p" "$cache")"
      gpu_prep_unpack "${debof[$p]}" "$pkgs/$p"
      cp -a "$pkgs/$p/." "$prefix/"
    done
    queue=()
    # Debian's alternatives (liblapack.so.3 -> lapack/liblapack.so.3, made
    # by postinst, which dpkg -x does not run).
    local libdir="$prefix/usr/lib/$GPU_DEPS_MULTIARCH"
    while IFS= read -r -d '' f; do
      so="$(basename "$f")"
      [ -e "$libdir/$so" ] || ln -s "$(realpath -m --relative-to="$libdir" "$f")" "$libdir/$so"
    done < <(find "$libdir" -mindepth 2 -maxdepth 2 \( -path '*/lapack/*' -o -path '*/blas/*' \) -name '*.so.[0-9]' -print0 2>/dev/null)
    # What the packed ELF files need and nothing packed provides.
    local provided needed
    provided="$(find "$prefix" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)"
    needed="$(find "$prefix" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0 | while IFS= read -r -d '' f; do
      gpu_prep_is_elf "$f" && gpu_prep_needed "$f"; done | sort -u)"
    for need in $needed; do
      [[ "$need" =~ $GPU_DEPS_BASE_SONAMES ]] && continue
      printf '%s\n' "$provided" | grep -qxF "$need" && continue
      p="$(gpu_prep_pkg_of_soname "$need")"
      [ -n "$p" ] || gpu_prep_die "a packed library needs $need, which no installed package provides here: run scripts/setup (it installs the -dev packages and so their libraries), then again"
      [[ " ${queue[*]} " == *" $p "* ]] && continue
      [ -z "${role[$p]:-}" ] || gpu_prep_die "$need (package $p) is still missing after $p was unpacked: look at how $p ships it"
      gpu_prep_say "closure: $need -> $p"
      role[$p]=dep; queue+=("$p")
    done
    # -dev links whose library package is not packed yet (libssl.so -> libssl.so.3)
    while IFS= read -r -d '' f; do
      so="$(basename "$(readlink "$f")")"
      p="$(dpkg -S "/usr/lib/$GPU_DEPS_MULTIARCH/$so" "/lib/$GPU_DEPS_MULTIARCH/$so" 2>/dev/null | head -1 | cut -d: -f1 || true)"
      [ -n "$p" ] || gpu_prep_die "$(realpath -m --relative-to="$prefix" "$f") points at $so, which no installed package holds"
      [[ " ${queue[*]} " == *" $p "* ]] && continue
      [ -z "${role[$p]:-}" ] || gpu_prep_die "$(basename "$f") still dangles after $p was unpacked"
      gpu_prep_say "closure: $(basename "$f") -> $p"
      role[$p]=dep; queue+=("$p")
    done < <(find "$prefix/usr/lib" -xtype l -name '*.so*' ! -name 'libgloo.so' -print0)
  done

  # gloo: only its headers are used (torch's ProcessGroupGloo.hpp); its CMake
  # config and libgloo.so would point at libgloo0, which is not packed.
  rm -rf "$prefix/usr/share/cmake/Gloo" "$prefix/usr/lib/libgloo.so"
  # Static archives that have a shared twin (gtest/gmock ship only .a: kept).
  while IFS= read -r -d '' f; do
    [ -e "${f%.a}.so" ] && rm -f "$f"
  done < <(find "$prefix" -name '*.a' -type f -print0)
  # Binaries: pkgconf only.
  find "$prefix/usr/bin" -mindepth 1 ! -name pkgconf -exec rm -f {} + 2>/dev/null || true
  local dangling
  dangling="$(find "$prefix" -xtype l | sed "s|^$prefix/||")"
  [ -z "$dangling" ] || gpu_prep_die "dangling links in the prefix: $dangling"

  # The -l names of the .pc files whose -dev package is not packed (coinutils.pc:
  # -lbz2 -llapack -lblas): the dev link libNAME.so to the packed library, as
  # libbz2-dev / liblapack-dev would make it; else the link looks for the system's.
  local libdir="$prefix/usr/lib/$GPU_DEPS_MULTIARCH" name real
  for name in $(cat "$libdir"/pkgconfig/*.pc | sed -n 's/^Libs:\(.*\)/\1/p' | tr ' ' '\n' | sed -n 's/^-l//p' | sort -u); do
    [ -e "$libdir/lib$name.so" ] && continue
    real="$(find "$libdir" \( -type f -o -type l \) -name "lib$name.so.[0-9]*" | sort | head -1)"
    [ -n "$real" ] || continue  # glibc's (-lm, -lpthread, -lrt)
    ln -s "$(realpath -m --relative-to="$libdir" "$real")" "$libdir/lib$name.so"
    gpu_prep_say "dev link lib$name.so -> $(realpath -m --relative-to="$libdir" "$real")"
  done
  gpu_prep_say "rewriting .pc and .cmake files and links for relocation"
  gpu_prep_fix_pc "$prefix"
  gpu_prep_fix_cmake "$prefix"
  gpu_prep_cmake_stubs "$prefix"

  # LD_LIBRARY_PATH folders: one relative link per SONAME.
  local out_dir
  for p in "${!role[@]}"; do
    while IFS= read -r -d '' f; do
      gpu_prep_is_elf "$f" || continue
      so="$(gpu_prep_soname "$f")"
      [[ "$so" == lib* ]] || continue
      local rel="${f#"$pkgs/$p/"}"
      case "${role[$p]}" in runtime) out_dir="$stage/out/lib" ;; *) out_dir="$stage/out/lib-fallback" ;; esac
      ln -sfn "../prefix/$rel" "$out_dir/$so"
    done < <(find "$pkgs/$p/usr/lib" -type f -name '*.so*' -print0 2>/dev/null)
  done

  # libzmq.pc's Requires.private (krb5-gssapi, libsodium, openpgm, norm,
  # libbsd) are for static linking only, but pkg-config insists on finding
  # them; their -dev packages are not packed, so the line goes. Any other
  # .pc of the prefix that cannot be resolved is reported below.
  local pkgconf_run=("$stage/out/bin/pkg-config")
  gpu_prep_write_env "$stage/out" 0 0  # the wrapper, for the checks; env.sh is rewritten below
  export PKG_CONFIG_LIBDIR="$prefix/usr/lib/$GPU_DEPS_MULTIARCH/pkgconfig:$prefix/usr/share/pkgconfig"
  if ! "${pkgconf_run[@]}" --exists libzmq 2>/dev/null; then
    perl -ni -e 'print unless /^Requires\.private:/' "$prefix/usr/lib/$GPU_DEPS_MULTIARCH/pkgconfig/libzmq.pc"
    gpu_prep_say "libzmq.pc: dropped Requires.private (static-only dependencies, not packed)"
  fi
  local m
  for m in cbc hiredis cpp-httplib libzmq; do
    "${pkgconf_run[@]}" --cflags --libs "$m" >/dev/null 2>"$stage/pc.err" ||
      gpu_prep_die "the packed pkg-config cannot resolve $m from the prefix alone: $(tr '\n' ' ' <"$stage/pc.err")"
  done
  for f in "$prefix/usr/lib/$GPU_DEPS_MULTIARCH/pkgconfig"/*.pc "$prefix/usr/share/pkgconfig"/*.pc; do
    [ -e "$f" ] || continue
    "${pkgconf_run[@]}" --exists "$(basename "$f" .pc)" 2>/dev/null ||
      gpu_prep_warn "$(basename "$f") does not resolve inside the prefix (the build does not use it)"
  done
  unset PKG_CONFIG_LIBDIR

  # No absolute /usr left in .pc and .cmake files.
  local left
  left="$(grep -rn --include='*.pc' --include='*.cmake' -E '(^|[^A-Za-z0-9_./}-])/usr(/|"|$)' "$prefix" | sed "s|^$prefix/||" || true)"
  [ -z "$left" ] || gpu_prep_die "absolute /usr paths left in the prefix's .pc/.cmake files: $left"

  # glibc / libstdc++ versions the packed ELF files need.
  local glibc glibcxx
  glibc="$(find "$prefix" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec readelf -V {} + 2>/dev/null | grep -o 'GLIBC_2\.[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)"
  glibcxx="$(find "$prefix" -type f \( -name '*.so*' -o -name '*.a' \) -exec readelf -V {} + 2>/dev/null | grep -o 'GLIBCXX_3\.4\.[0-9]*' | sed 's/GLIBCXX_//' | sort -uV | tail -1)"
  gpu_prep_write_env "$stage/out" "${glibc:-2.36}" "${glibcxx:-3.4}"

  # The budget, then Fashion-MNIST if it fits.
  local max_bytes=$((max_mib * 1024 * 1024)) size
  size="$(du -sb "$stage/out" | cut -f1)"
  local data_note="not packed (GPU_DEPS_DATASET=no)"
  if [ "$dataset_mode" != no ]; then
    p="$GPU_DEPS_DATA_PACKAGE"
    gpu_prep_resolve "$p"
    debof[$p]="$(gpu_prep_deb_of "$p" "$cache")"
    gpu_prep_unpack "${debof[$p]}" "$pkgs/$p"
    local dsize
    dsize="$(du -sb "$pkgs/$p" | cut -f1)"
    if ((size + dsize <= max_bytes)); then
      cp -a "$pkgs/$p/." "$prefix/"; role[$p]=data
      size="$(du -sb "$stage/out" | cut -f1)"
      data_note="packed in prefix/usr/share/datasets/fashion-mnist"
    elif [ "$dataset_mode" = yes ]; then
      gpu_prep_die "Fashion-MNIST ($((dsize / 1048576)) MiB) does not fit: $((size / 1048576)) MiB of libraries + it > ${max_mib} MiB (GPU_DEPS_DATASET=auto leaves it out; or raise GPU_DEPS_MAX_MIB if the carry allows)"
    else
      data_note="left out: $((dsize / 1048576)) MiB would bring gpu-deps/ to $(((size + dsize) / 1048576)) MiB > ${max_mib} MiB"
      gpu_prep_say "Fashion-MNIST $data_note"
    fi
  fi
  gpu_prep_write_env "$stage/out" "${glibc:-2.36}" "${glibcxx:-3.4}"  # again: env.sh exports the dataset's path when packed

  # Per-package sizes (files of each package still in the prefix).
  declare -A psize=()
  find "$prefix" -type f -printf '%s\t%P\n' >"$stage/sizes"
  for p in "${!role[@]}"; do
    psize[$p]="$(find "$pkgs/$p" -type f -printf '%P\n' | awk -F'\t' 'NR==FNR {size[$2] = $1; next} ($0 in size) {s += size[$0]} END {print s+0}' "$stage/sizes" -)"
  done
  if ((size > max_bytes)); then
    local top
    top="$(for p in "${!psize[@]}"; do echo "${psize[$p]} $p"; done | sort -rn | head -8 | awk '{printf "%s (%.1f MiB), ", $2, $1/1048576}')"
    gpu_prep_die "gpu-deps/ would be $((size / 1048576)) MiB > ${max_mib} MiB; the largest packages: ${top%, }. Drop what the build does not need from the lists at the top of scripts/gpu-check-prepare.sh, or raise GPU_DEPS_MAX_MIB if the carry allows"
  fi

  # manifest.json
  {
    printf '{\n  "made_by": "scripts/gpu-check-prepare.sh",\n'
    printf '  "date": "%s",\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf '  "host": "%s",\n' "$(. /etc/os-release; echo "$PRETTY_NAME")"
    printf '  "size_bytes": %s,\n  "budget_bytes": %s,\n' "$size" "$max_bytes"
    printf '  "needs": {"glibc": "%s", "glibcxx": "%s"},\n' "${glibc:-}" "${glibcxx:-}"
    printf '  "fashion_mnist": "%s",\n' "$data_note"
    printf '  "changes": ["docs, man pages, locales, OpenSSL engines/modules, COIN-OR sample data and static .a with a shared twin dropped", "/lib merged into /usr/lib", "absolute links made relative", ".pc files: /usr -> ${pcfiledir}-relative; hiredis.pc libdir -> lib/%s", ".cmake files: /usr -> ${CMAKE_CURRENT_LIST_DIR}-relative, Debian _realOrig blocks dropped", "lib/cmake/<Pkg>/ stubs for non-multiarch CMake", "libzmq.pc: Requires.private dropped", "gloo: headers only (no CMake config, no libgloo.so)", "liblapack.so.3/libblas.so.3 alternatives links made"],\n' "$GPU_DEPS_MULTIARCH"
    printf '  "packages": [\n'
    local first=1
    for p in $(printf '%s\n' "${!role[@]}" | sort); do
      ((first)) || printf ',\n'
      first=0
      printf '    {"name": "%s", "version": "%s", "role": "%s", "bytes": %s, "deb": "%s"}' \
        "$p" "$(dpkg-deb -f "${debof[$p]}" Version)" "${role[$p]}" "${psize[$p]:-0}" "$(basename "${debof[$p]}")"
    done
    printf '\n  ]\n}\n'
  } >"$stage/out/manifest.json"
  size="$(du -sb "$stage/out" | cut -f1)"

  rm -rf "$root/gpu-deps"
  mv "$stage/out" "$root/gpu-deps"
  rm -rf "$stage"; trap - EXIT
  gpu_prep_say "packed ${#role[@]} packages into gpu-deps/: $(awk -v s="$size" 'BEGIN {printf "%.1f MiB", s/1048576}') ($size bytes) of ${max_mib} MiB; Fashion-MNIST $data_note ($((SECONDS - started)) s)"
  gpu_prep_say "on the GPU machine, from the repo root: . gpu-deps/env.sh"
}

# --- a tiny CMake project against gpu-deps/ alone -----------------------------
# GPU_DEPS_SELFTEST_ISOLATE=1 (default here) re-roots every CMake search into
# the prefix and restricts pkg-config to it, so a system copy cannot be picked.
gpu_check_prepare_selftest() {
  local root gd t
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  gd="$root/gpu-deps"
  [ -f "$gd/env.sh" ] || gpu_prep_die "no gpu-deps/env.sh: run scripts/gpu-check-prepare.sh first"
  t="$(mktemp -d /tmp/gpu-deps-selftest.XXXXXX)"
  cat >"$t/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.18)
project(gpu_deps_selftest LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(nlohmann_json REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
find_package(cppzmq REQUIRED)
find_package(ZLIB REQUIRED)
find_package(muparser REQUIRED)
find_package(GTest REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(CBC REQUIRED IMPORTED_TARGET cbc)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
message(STATUS "found: PKG_CONFIG_EXECUTABLE=${PKG_CONFIG_EXECUTABLE}")
foreach(p nlohmann_json yaml-cpp fmt spdlog CLI11 cppzmq muparser GTest)
  message(STATUS "found: ${p}_DIR=${${p}_DIR}")
endforeach()
message(STATUS "found: ZLIB=${ZLIB_LIBRARIES} ${ZLIB_INCLUDE_DIRS}")
message(STATUS "found: ZeroMQ=${ZeroMQ_LIBRARIES}")
foreach(p CBC HIREDIS HTTPLIB)
  message(STATUS "found: ${p}=${${p}_LINK_LIBRARIES} ${${p}_INCLUDE_DIRS}")
endforeach()
add_executable(t t.cc)
target_link_libraries(t PRIVATE nlohmann_json::nlohmann_json yaml-cpp fmt::fmt spdlog::spdlog CLI11::CLI11
  cppzmq ZLIB::ZLIB muparser::muparser PkgConfig::CBC PkgConfig::HIREDIS PkgConfig::HTTPLIB)
add_executable(g g.cc)
target_link_libraries(g PRIVATE GTest::gtest GTest::gtest_main Threads::Threads)
EOF
  cat >"$t/t.cc" <<'EOF'
#include <CLI/CLI.hpp>
#include <OsiClpSolverInterface.hpp>
#include <CbcModel.hpp>
#include <hiredis.h>
#include <httplib.h>
#include <muParser.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>
#include <zlib.h>
#include <zmq.hpp>
int main() {
  YAML::Node y = YAML::Load("a: 2");
  nlohmann::json j = {{"a", y["a"].as<int>()}};
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::pair);
  s.bind("inproc://x");
  int maj, min, pat; zmq::version(&maj, &min, &pat);
  mu::Parser mp; mp.SetExpr("2*3");
  // max x + y, x + 2y <= 4, 3x + y <= 6, x, y integers: the LP gives 2.8, CBC's branch and bound 2
  OsiClpSolverInterface lp;
  CoinPackedMatrix m(false, 0, 0); m.setDimensions(0, 2);
  CoinPackedVector r1; r1.insert(0, 1); r1.insert(1, 2); m.appendRow(r1);
  CoinPackedVector r2; r2.insert(0, 3); r2.insert(1, 1); m.appendRow(r2);
  double cl[] = {0, 0}, cu[] = {10, 10}, obj[] = {-1, -1}, rl[] = {-1e30, -1e30}, ru[] = {4, 6};
  lp.loadProblem(m, cl, cu, obj, rl, ru);
  lp.setInteger(0); lp.setInteger(1);
  lp.messageHandler()->setLogLevel(0);
  CbcModel cbc(lp); cbc.setLogLevel(0); cbc.branchAndBound();
  redisReader* rr = redisReaderCreate(); redisReaderFree(rr);
  httplib::Server srv; (void)srv;
  spdlog::info("yaml a={} json={} zmq {}.{}.{} muparser {} cbc objective {} zlib {}",
               y["a"].as<int>(), j.dump(), maj, min, pat, mp.Eval(), -cbc.getObjValue(), zlibVersion());
  return cbc.getObjValue() == -2 ? 0 : 1;
}
EOF
  cat >"$t/g.cc" <<'EOF'
#include <gtest/gtest.h>
TEST(GpuDeps, Works) { EXPECT_EQ(1 + 1, 2); }
EOF
  (
    # shellcheck disable=SC1091
    . "$gd/env.sh"
    local -a iso=()
    if [ "${GPU_DEPS_SELFTEST_ISOLATE:-1}" = 1 ]; then
      iso=(-DCMAKE_FIND_ROOT_PATH="$gd/prefix" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY
           -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY)
      export PKG_CONFIG_LIBDIR="$gd/prefix/usr/lib/$GPU_DEPS_MULTIARCH/pkgconfig:$gd/prefix/usr/share/pkgconfig"
      export PKG_CONFIG="$gd/bin/pkg-config"
    fi
    gpu_prep_say "selftest in $t (isolated: ${GPU_DEPS_SELFTEST_ISOLATE:-1})"
    cmake -S "$t" -B "$t/build" -DCMAKE_BUILD_TYPE=Release "${iso[@]}" >"$t/configure.log" 2>&1 ||
      { cat "$t/configure.log" >&2; gpu_prep_die "selftest: configure failed ($t/configure.log)"; }
    grep 'found: ' "$t/configure.log" | sed 's/^-- found: /gpu-check --prepare: selftest: /'
    local outside
    outside="$(grep 'found: ' "$t/configure.log" | grep -v PKG_CONFIG_EXECUTABLE | tr ' ;' '\n\n' | grep '^/' | grep -v "^$gd/" | grep -Ev '/lib(pthread|rt|dl|m|c)\.(so|a)' || true)"
    [ -z "$outside" ] || gpu_prep_die "selftest: found outside gpu-deps/: $outside"
    cmake --build "$t/build" -j "${GPU_DEPS_SELFTEST_JOBS:-1}" >"$t/build.log" 2>&1 ||
      { tail -40 "$t/build.log" >&2; gpu_prep_die "selftest: build failed ($t/build.log)"; }
    env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$t/build/t" ||
      gpu_prep_die "selftest: the program failed"
    env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$LD_LIBRARY_PATH" "$t/build/g" --gtest_brief=1 >/dev/null ||
      gpu_prep_die "selftest: the gtest program failed"
    gpu_prep_say "selftest: ldd (env -i, LD_LIBRARY_PATH from env.sh):"
    env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" ldd "$t/build/t" |
      grep -E 'yaml|fmt|spdlog|zmq|sodium|pgm|norm|Cbc|Clp|Cgl|Osi|CoinUtils|hiredis|httplib|muparser|lapack|blas|gfortran|ssl|crypto|brotli|libz\.' | sed 's/^\s*/  /'
    local bad
    bad="$(env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" ldd "$t/build/t" | grep -E 'yaml|fmt|spdlog|zmq|Cbc|Clp|Cgl|Osi|CoinUtils|hiredis|httplib|muparser' | grep -v "=> $gd/" || true)"
    [ -z "$bad" ] || gpu_prep_die "selftest: these resolve outside gpu-deps/: $bad"
    ! env -i LD_LIBRARY_PATH="$LD_LIBRARY_PATH" ldd "$t/build/t" | grep -q 'not found' ||
      gpu_prep_die "selftest: ldd finds not every library"
    gpu_prep_say "selftest passed"
  )
  if [ "${GPU_DEPS_SELFTEST_KEEP:-0}" = 1 ]; then gpu_prep_say "selftest: kept $t"; else rm -rf "$t"; fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    ""|--prepare) gpu_check_prepare ;;
    --selftest) gpu_check_prepare_selftest ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
    *) gpu_prep_die "unknown argument '$1' (use --prepare, --selftest or --help)" ;;
  esac
fi
