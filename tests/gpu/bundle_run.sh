# shellcheck shell=bash disable=SC2154 # results, say, die, row: run.sh's
# Sourced by tests/gpu/run.sh for --bundle: unpacks a bundle of tools/gpu_bundle.sh, checks the
# machine's C and C++ runtimes against its MANIFEST, finds the NVIDIA libraries it leaves to the
# image, and says which libraries a binary cannot load. Uses run.sh's say, die, row and at_least.

# bundle_unpack <file or unpacked folder> <scratch folder>: sets bundle_dir and the MANIFEST's
# values (bundle_kind, and the versions it needs).
bundle_unpack() {
  local src=$1 scratch=$2
  if [[ -d $src/dsx-gpu-bundle ]]; then  # the folder it was unpacked in
    bundle_dir=$(realpath "$src/dsx-gpu-bundle")
  elif [[ -d $src ]]; then
    bundle_dir=$(realpath "$src")
  elif [[ -f $src ]]; then
    mkdir -p "$scratch"
    # tar finds the compression (xz or gzip) from the file's first bytes
    if ! timeout 300 tar -C "$scratch" -xf "$src" 2>"$scratch/tar.err"; then
      die 1 "cannot unpack $src ($(head -c 300 "$scratch/tar.err")): it is not a whole .tar.xz or .tar.gz; copy it again,
  or make it again with tools/gpu_bundle.sh BUILD_DIR FILE"
    fi
    bundle_dir=$scratch/dsx-gpu-bundle
  else
    die 1 "no bundle at $src: make one with tools/gpu_bundle.sh BUILD_DIR FILE (docs/gpu.md)"
  fi
  manifest=$bundle_dir/MANIFEST
  if [[ ! -f $manifest ]] || [[ $(head -n 1 "$manifest") != "dsx-gpu-bundle 1" ]]; then
    die 1 "$src is not a dsx GPU bundle (no dsx-gpu-bundle/MANIFEST of version 1): make it with tools/gpu_bundle.sh"
  fi
  local path _
  while read -r path _; do
    [[ -f $bundle_dir/$path ]] || die 1 "$src lacks $path, which its MANIFEST lists: make the bundle again"
  done < <(sed -n 's/^file //p' "$manifest")
  bundle_kind=$(sed -n 's/^kind //p' "$manifest")
  bundle_glibc=$(sed -n 's/^needs-glibc //p' "$manifest")
  bundle_glibcxx=$(sed -n 's/^needs-glibcxx //p' "$manifest")
  bundle_cxx_glibc=$(sed -n 's/^cxx-needs-glibc //p' "$manifest")
}

# bundle_runtimes: glibc must be as new as the bundle's files need; the image's libstdc++ is
# taken when it is new enough, else the bundle's (lib/cxx), which may need a newer glibc.
bundle_runtimes() {
  local have_glibc system_cxx have_glibcxx
  have_glibc=$(getconf GNU_LIBC_VERSION | grep -oE '[0-9.]+$')
  if [[ -n $bundle_glibc ]] && ! at_least "$bundle_glibc" "$have_glibc"; then
    die 1 "the bundle needs glibc >= $bundle_glibc, this machine has $have_glibc: make the bundle on an older
  distribution (tools/gpu_bundle.sh), or run it on a newer image"
  fi
  system_cxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ && !n++ {print $NF}')
  have_glibcxx=$(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "${system_cxx:-/nonexistent}" 2>/dev/null | sort -uV | tail -n 1 | sed 's/GLIBCXX_//' || true)
  if [[ -n $have_glibcxx ]] && at_least "${bundle_glibcxx:-0}" "$have_glibcxx"; then
    cxx_from="the image's ($system_cxx, GLIBCXX_$have_glibcxx)"
  elif at_least "${bundle_cxx_glibc:-0}" "$have_glibc"; then
    export LD_LIBRARY_PATH=$bundle_dir/lib/cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cxx_from="the bundle's (the image has ${have_glibcxx:+GLIBCXX_}${have_glibcxx:-none}, the binaries need GLIBCXX_$bundle_glibcxx)"
  else
    die 1 "the bundle needs libstdc++ with GLIBCXX_$bundle_glibcxx; this image has ${have_glibcxx:-none} and its glibc
  $have_glibc is too old for the bundle's own copy (glibc >= $bundle_cxx_glibc): install a newer libstdc++6"
  fi
  row "C/C++ runtimes" ok - - - "glibc $have_glibc (bundle needs $bundle_glibc); libstdc++: $cxx_from"
}

# The places an image keeps NVIDIA's libraries beside the loader's own: the toolkit, and Python's
# nvidia-* wheels (an image with PyTorch has cuDNN and NCCL there).
nvidia_lib_dirs() {
  local d
  for d in ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $d ]] && echo "$d"
  done
  timeout 30 python3 -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null | while read -r d; do
    find "$d" -mindepth 2 -maxdepth 2 -type d -name lib 2>/dev/null
  done
}

# find_lib <soname>: sets where to the path the loader will take it from, adding a folder to
# LD_LIBRARY_PATH if only the toolkit or a wheel has it; empty when it is nowhere. Not called in
# a subshell, so that the folder stays on the path.
find_lib() {
  local d
  where=""
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}; do
    [[ -e $d/$1 ]] && { where=$d/$1; return; }
  done
  d=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n && /x86-64/ && !k++ {print $NF}')
  [[ -n $d && -e $d ]] && { where=$d; return; }
  [[ -n ${nvidia_dirs+set} ]] || nvidia_dirs=$(nvidia_lib_dirs || true)  # asked once: Python is slow to start
  while read -r d; do
    if [[ -n $d && -e $d/$1 ]]; then
      export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      where=$d/$1
      return
    fi
  done <<<"$nvidia_dirs"
}

# bundle_nvidia_libraries: finds each NVIDIA library the MANIFEST names, writes what it found to
# $results/cuda-libraries.txt and a row; a missing one fails (or, for cuDNN, skips) its binaries.
bundle_nvidia_libraries() {
  local lib where found=() missing=() shim=()
  : >"$results/cuda-libraries.txt"
  for lib in $(awk '$1 == "file" && $4 != "-" {print $4}' "$manifest" | tr ',' '\n' | sort -u); do
    find_lib "$lib"
    if [[ -z $where && -f $bundle_dir/lib/cudnn-shim/$lib ]]; then
      # No cuDNN here: its loader alone lets the binaries start; cuDNN's attention then says it
      # cannot run (its tests skip, the models take their own kernels).
      export LD_LIBRARY_PATH=$bundle_dir/lib/cudnn-shim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      shim+=("$lib")
      echo "$lib missing; the bundle's loader alone (lib/cudnn-shim)" >>"$results/cuda-libraries.txt"
    elif [[ -n $where ]]; then
      found+=("$lib")
      echo "$lib $where" >>"$results/cuda-libraries.txt"
    else
      missing+=("$lib")
      echo "$lib missing" >>"$results/cuda-libraries.txt"
    fi
  done
  if [[ $bundle_kind == emulated ]]; then
    row "CUDA libraries" ok - - - "emulated GPU: its stand-in library is in the bundle"
  elif ((${#missing[@]} == 0 && ${#shim[@]} > 0)); then
    row "CUDA libraries" "ok, no cuDNN" - - - "found ${found[*]}; ${shim[*]}: only the bundle's loader, so cuDNN's attention is unsupported (its tests skip)"
  elif ((${#missing[@]} == 0)); then
    row "CUDA libraries" ok - - - "found ${found[*]} (where: $(basename "$results")/cuda-libraries.txt)"
  else
    row "CUDA libraries" "${missing[*]} missing" - - - "found ${found[*]:-none}${shim[*]:+; ${shim[*]}: only the loader in the bundle}; a binary that needs a missing one does not run"
  fi
}

# unloadable <binary>: the libraries it needs that the loader cannot find, space-separated.
unloadable() {
  timeout 60 ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 == "not" {printf "%s%s", sep, $1; sep = " "}'
}

# bundle_dry_run: every binary and bundled library loads, from the bundle's copies, except the
# NVIDIA libraries the image must provide. Status 1 otherwise.
bundle_dry_run() {
  local path _ cuda missing lib bad=0 foreign outside
  while read -r path _ cuda; do
    [[ $path == *.sh ]] && continue
    missing=$(unloadable "$bundle_dir/$path")
    foreign=""
    for lib in $missing; do
      [[ ,$cuda, == *,$lib,* ]] || foreign+=" $lib"
    done
    # A library the bundle carries must load from the bundle, not from this machine.
    outside=$(timeout 60 ldd "$bundle_dir/$path" 2>/dev/null | awk -v b="$bundle_dir/lib" '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
      while read -r lib where; do
        [[ -e $bundle_dir/lib/$lib && $(realpath -m "$where") != "$bundle_dir/lib/"* ]] && printf ' %s' "$lib"
      done)
    if [[ -n $foreign || -n $outside ]]; then
      bad=1
      row "$path" FAILED - - - "${foreign:+cannot find:$foreign; }${outside:+loads from outside the bundle:$outside}"
    else
      row "$path" ok - - - "resolves${missing:+; the image must provide: $missing}"
    fi
  done < <(sed -n 's/^file //p' "$manifest")
  return "$bad"
}
