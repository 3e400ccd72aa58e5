//! Modules that do not load refuse the start, naming the spec's place, the
//! Python file and line, and Python's message.

use oka_python::Config;

use crate::{folder, load, load_dir, python, spec};

fn one_udf(function: &str) -> String {
    spec(&format!(
        "  f:
    kind: on_demand
    entity: TestEntity
    dependencies: [test_feature]
    args: {{scale: {{type: float, default: 1.0}}}}
    udf: {{python: {{file: udfs.py, function: {function}}}}}
"
    ))
}

fn refusal(name: &str, module: &str, function: &str) -> String {
    load(name, &one_udf(function), module, 1).unwrap_err()
}

#[test]
fn a_syntax_error_names_its_line() {
    let e = refusal(
        "syntax",
        "def f(test_feature, scale=1.0):\n    return {\n\nx = = 1\n",
        "f",
    );
    assert!(e.contains("features.f.udf.python: "), "{e}");
    assert!(e.contains("udfs.py:"), "{e}");
    assert!(e.contains("SyntaxError"), "{e}");
}

#[test]
fn an_import_error_names_the_line_of_the_import() {
    let e = refusal(
        "import",
        "import math\n\nimport no_such_module_here\n\ndef f(test_feature, scale=1.0):\n    return {}\n",
        "f",
    );
    assert!(e.contains("udfs.py:3: the module does not import: ModuleNotFoundError: No module named 'no_such_module_here'"), "{e}");
}

#[test]
fn a_missing_function_lists_what_the_module_defines() {
    let e = refusal(
        "missing",
        "def g(test_feature, scale=1.0):\n    return {}\n",
        "f",
    );
    assert!(e.contains("no function `f` in it (it defines: g)"), "{e}");
}

#[test]
fn a_function_that_cannot_take_the_inputs_and_arguments_is_refused_at_its_def() {
    let e = refusal("signature", "\n\ndef f(a, b):\n    return {}\n", "f");
    assert!(e.contains("udfs.py:3: `f(a, b)` cannot be called with the inputs as positional arguments (test_feature) and the arguments as keywords (scale)"), "{e}");
    // **kwargs takes any argument.
    load(
        "kwargs",
        &one_udf("f"),
        "def f(dep, **kw):\n    return {}\n",
        1,
    )
    .unwrap();
}

#[test]
fn a_file_that_is_not_there_is_a_spec_error() {
    let dir = folder("nofile");
    std::fs::write(dir.join("spec.yaml"), one_udf("f")).unwrap();
    let e = load_dir(
        &dir,
        Config {
            python: python(),
            workers: 1,
            memory_mib: 1024,
            compile: false,
        },
    )
    .unwrap_err();
    assert!(
        e.contains("features.f.udf.python: cannot read the Python file"),
        "{e}"
    );
    assert!(e.contains("no such file or directory"), "{e}");
}

#[test]
fn an_interpreter_that_is_not_there_says_what_to_do() {
    let dir = folder("nopython");
    std::fs::write(dir.join("spec.yaml"), one_udf("f")).unwrap();
    std::fs::write(dir.join("udfs.py"), "def f(d, scale=1.0):\n    return {}\n").unwrap();
    let config = Config {
        python: "/no/such/python3".into(),
        workers: 1,
        memory_mib: 1024,
        compile: false,
    };
    let e = load_dir(&dir, config).unwrap_err();
    assert!(
        e.contains(
            "cannot start the Python interpreter `/no/such/python3`: no such file or directory"
        ),
        "{e}"
    );
    assert!(e.contains("--python"), "{e}");
}

#[test]
fn a_module_named_like_a_loaded_python_module_is_refused() {
    let dir = folder("osname");
    std::fs::write(
        dir.join("spec.yaml"),
        one_udf("f").replace("udfs.py", "os.py"),
    )
    .unwrap();
    std::fs::write(dir.join("os.py"), "def f(d, scale=1.0):\n    return {}\n").unwrap();
    let e = load_dir(
        &dir,
        Config {
            python: python(),
            workers: 1,
            memory_mib: 1024,
            compile: false,
        },
    )
    .unwrap_err();
    assert!(
        e.contains("the module name `os` is taken by Python's own module"),
        "{e}"
    );
}
