"""The packaging files agree with each other: environment.yml and pyproject.toml name the same
dependencies with the same ranges, and the layout of the design card is there."""

import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[1]


def pyproject():
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def requirements(lines):
    return {Requirement(line).name.lower(): Requirement(line).specifier for line in lines}


def test_environment_yml_matches_pyproject():
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    wanted = requirements(project["dependencies"] + extras["dev"] + extras["docs"])
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e .[dev]" in pip_section, "environment.yml must install the project itself"
    listed = requirements([line for line in pip_section if not line.startswith("-e")])
    missing = sorted(set(wanted) - set(listed))
    extra = sorted(set(listed) - set(wanted))
    assert not missing, f"environment.yml lacks {missing} (in pyproject.toml)"
    assert not extra, f"environment.yml names {extra}, which pyproject.toml does not"
    differ = {n: (str(wanted[n]), str(listed[n])) for n in wanted if wanted[n] != listed[n]}
    assert not differ, f"version ranges differ (pyproject, environment.yml): {differ}"


def test_environment_python_is_allowed_by_pyproject():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    version = python.split("=", 1)[1]
    assert version in SpecifierSet(pyproject()["project"]["requires-python"])


def test_every_dependency_has_a_bounded_range():
    project = pyproject()["project"]
    lines = project["dependencies"] + [
        line for extra in project["optional-dependencies"].values() for line in extra
    ]
    for line in lines:
        spec = Requirement(line).specifier
        bounded = any(s.operator in ("<", "<=", "~=", "==") for s in spec)
        assert bounded, f"{line!r} has no upper bound: pin a compatible range"


def test_layout_of_the_design_card():
    for name in ["notebooks", "lmskit", "compilerkit", "datasets", "tests", "benchmarks"]:
        assert (REPO / name).is_dir(), f"missing folder {name}/"
    for name in ["environment.yml", "pyproject.toml", "README.md", "Makefile", ".ci/run"]:
        assert (REPO / name).is_file(), f"missing file {name}"
    # A top-level `datasets` package would shadow the popular library of that name.
    assert not (REPO / "datasets" / "__init__.py").exists()
    # xdsl installs a top-level `benchmarks` package; ours must stay a folder of scripts.
    assert not (REPO / "benchmarks" / "__init__.py").exists()


def test_readme_opens_with_the_two_setup_commands():
    text = (REPO / "README.md").read_text()
    blocks = text.split("```")
    first_commands = [line.strip() for line in blocks[1].splitlines()[1:] if line.strip()]
    assert first_commands == ["make lab", "make test"], first_commands
