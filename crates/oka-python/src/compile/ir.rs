//! A translated UDF's body as Oka evaluates it, once `check` has read the
//! IR `translate.py` writes and resolved every name in it.

use std::sync::Arc;

/// A literal.
#[derive(Debug, Clone)]
pub enum Lit {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
}

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    IsNone,
    IsNotNone,
}

/// A function with an exact counterpart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    Min,
    Max,
    Abs,
    Round,
    Len,
    Sum,
    Any,
    All,
    Float,
    Int,
    Bool,
    Str,
    /// `math.f`: a float function with `math_1`'s rule.
    Math(MathFn),
    Floor,
    Ceil,
    Trunc,
    Fabs,
    IsNan,
    IsInf,
    IsFinite,
}

/// A `math` function of one float (libm's, as CPython calls it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MathFn {
    Sqrt,
    Exp,
    Log,
    Log10,
    Log2,
    Sin,
    Cos,
    Tan,
    Atan,
    Tanh,
}

impl MathFn {
    /// The function at `x`.
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Self::Sqrt => x.sqrt(),
            Self::Exp => x.exp(),
            Self::Log => x.ln(),
            Self::Log10 => x.log10(),
            Self::Log2 => x.log2(),
            Self::Sin => x.sin(),
            Self::Cos => x.cos(),
            Self::Tan => x.tan(),
            Self::Atan => x.atan(),
            Self::Tanh => x.tanh(),
        }
    }
}

/// A string method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Lower,
    Upper,
    Strip,
    StartsWith,
    EndsWith,
}

/// An expression.
#[derive(Debug, Clone)]
pub enum Expr {
    Const(Lit),
    Input(usize),
    Arg(usize),
    Local(usize),
    /// A record's column.
    Field(Box<Expr>, usize),
    Index(Box<Expr>, Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Neg(Box<Expr>),
    Pos(Box<Expr>),
    Not(Box<Expr>),
    Cmp(Vec<CmpOp>, Vec<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    IfExp(Box<(Expr, Expr, Expr)>),
    Call(Func, Vec<Expr>),
    Method(Box<Expr>, Method, Vec<Expr>),
    FStr(Vec<Expr>),
    List(Vec<Expr>),
    Comp(Box<Comp>),
    /// The output record: per output column, its expression (`None`: not
    /// given — a key from the request, the timestamp `now`), and the columns
    /// that may not be None (a Volga entity's `field(...)`s).
    Record(Box<[Option<Expr>]>, Box<[usize]>),
    /// `datetime.now()`, `utcnow()`: the request's time.
    Now,
}

/// A comprehension: `[elt for slot in iter if conds]`, or a generator.
#[derive(Debug, Clone)]
pub struct Comp {
    pub list: bool,
    pub slot: usize,
    pub iter: Expr,
    pub elt: Expr,
    pub conds: Vec<Expr>,
}

/// A statement.
#[derive(Debug, Clone)]
pub enum Stmt {
    Assign(usize, Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    For(usize, Expr, Vec<Stmt>),
    Return(Expr),
}

/// A function's body, checked.
#[derive(Debug, Clone)]
pub struct Body {
    pub slots: usize,
    pub stmts: Vec<Stmt>,
    /// The output columns some record gives `datetime.now()`.
    pub now_columns: Vec<usize>,
}
