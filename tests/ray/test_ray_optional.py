"""Ray is an optional dependency: ``import syft_lab`` never imports it, and without it the Ray
functions say how to install it (checked in fresh interpreters)."""
import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_syft_lab_does_not_import_ray():
    out = run("import sys, syft_lab as sy; sy.hook(); print(sy.ray.is_initialized(), 'ray' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]  # is_initialized() may look, but does not start Ray


def test_without_ray_the_ray_functions_say_how_to_install_it():
    code = ("import sys; sys.modules['ray'] = None\n"  # as if Ray were not installed
            "import syft_lab as sy\n"
            "for call in (sy.ray.init, lambda: sy.RayWorker('bob'), lambda: sy.ray.workers(2)):\n"
            "    try:\n"
            "        call()\n"
            "    except sy.SyftError as e:\n"
            "        print(e)\n")
    out = run(code)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3 and all('pip install "syft-lab[ray]"' in line for line in lines), lines
