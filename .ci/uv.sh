# Sourced by the CI steps that set up venvs of their own (.ci/package, .ci/floor): `lane_venv VENV
# ARGS...` makes a fresh venv and installs ARGS into it with uv (PyPI's `uv`), from one cache
# shared by every lane, files hardlinked from it. These lanes test the wheel, not pip: the README's
# own command (`pip install -e ".[mpich,test]"`) is .ci/run's, and the source recipe of
# docs/how-to/choose-mpi.md is run with pip as written (.ci/openmpi). Measured on CI's 2 cores: a lane's venv
# (the wheel, impi-rt, the test tools; JAX, jaxlib, SciPy, IPython, ipyparallel...) took 29 CPU
# seconds with pip (`python3 -m venv` with pip 5.7, pip's upgrade 2.2, the install 21.4 with a
# cold cache), 3.3 with uv (0.2 for the venv without pip, 3.1 with a cold cache, 2.0 warm): about
# 150 CPU seconds less over .ci/package's five lanes and .ci/floor, which set theirs up beside the
# suite on CI's 2 cores. The same versions are installed (JAX 0.10.2, SciPy 1.17.1, ... checked).
# .ci/run installs uv once and exports MPINB_CI_UV and UV_CACHE_DIR; a step run alone installs
# its own into ITS_WORK/uv (then uses ITS_WORK/uv-cache).
ci_uv_setup() {  # ci_uv_setup WORK: sets UV, the uv to use, and UV_CACHE_DIR
    local work=$1
    if [ -n "${MPINB_CI_UV:-}" ] && [ -x "$MPINB_CI_UV" ]; then
        UV=$MPINB_CI_UV
    else
        python3 -m venv "$work/uv" && "$work/uv/bin/python" -m pip install -q uv > "$work/uv.log" 2>&1 \
            || { grep -v "^WARNING: Location" "$work/uv.log" >&2; return 1; }
        UV=$work/uv/bin/uv
    fi
    export UV_CACHE_DIR=${UV_CACHE_DIR:-$work/uv-cache}
}
lane_venv() {  # lane_venv VENV ARGS...: a fresh venv (without pip) with ARGS installed by uv
    local venv=$1; shift
    python3 -m venv --without-pip "$venv" && "$UV" pip install -q --python "$venv/bin/python" "$@"
}
