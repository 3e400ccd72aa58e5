"""The corpus of small UDFs the translator is tested on (crates/oka-python
tests/integration/compiled.rs): each function's comment line says its output
type, whether it reads one record (`one`) or a window (`many`), and what the
translation must do — `compiled` (then proven equal to CPython at load, and
its answers compared again by the test) or `refused: REASON` (it stays in
Python, for that reason). Signatures: `(r, x, n, word)` — a record of `Rec`
(see corpus.yaml), then the arguments; `(w, x, n, word)` for a window.
Generated once from tables of expressions; edit freely."""

import functools
import json
import math
from datetime import datetime, timezone
from math import ceil, floor, sqrt

SCALE = 2.0
COUNTER = 0


#: float one compiled
def e001(r, x, n, word):
    return {"v": r['a'] + r['b']}


#: float one compiled
def e002(r, x, n, word):
    return {"v": r['a'] - r['b']}


#: float one compiled
def e003(r, x, n, word):
    return {"v": r['a'] * r['b']}


#: float one compiled
def e004(r, x, n, word):
    return {"v": r['a'] / r['b']}


#: float one compiled
def e005(r, x, n, word):
    return {"v": r['a'] // r['b']}


#: float one compiled
def e006(r, x, n, word):
    return {"v": r['a'] % r['b']}


#: float one compiled
def e007(r, x, n, word):
    return {"v": -r['a']}


#: float one compiled
def e008(r, x, n, word):
    return {"v": +r['a']}


#: float one compiled
def e009(r, x, n, word):
    return {"v": abs(r['a'])}


#: float one compiled
def e010(r, x, n, word):
    return {"v": r['a'] ** 2}


#: float one compiled
def e011(r, x, n, word):
    return {"v": r['a'] ** 0.5}


#: float one compiled
def e012(r, x, n, word):
    return {"v": r['a'] ** 3}


#: float one compiled
def e013(r, x, n, word):
    return {"v": r['a'] * x}


#: float one compiled
def e014(r, x, n, word):
    return {"v": r['a'] / x}


#: float one compiled
def e015(r, x, n, word):
    return {"v": (r['a'] + r['b']) * x}


#: float one compiled
def e016(r, x, n, word):
    return {"v": r['a'] * r['a'] + r['b'] * r['b']}


#: float one compiled
def e017(r, x, n, word):
    return {"v": r['a'] - r['a']}


#: float one compiled
def e018(r, x, n, word):
    return {"v": r['a'] * 0.0}


#: float one compiled
def e019(r, x, n, word):
    return {"v": r['a'] / 3}


#: float one compiled
def e020(r, x, n, word):
    return {"v": r['a'] // 2}


#: float one compiled
def e021(r, x, n, word):
    return {"v": r['a'] % 2}


#: float one compiled
def e022(r, x, n, word):
    return {"v": r['a'] % -2.0}


#: float one compiled
def e023(r, x, n, word):
    return {"v": r['a'] // -2.0}


#: float one compiled
def e024(r, x, n, word):
    return {"v": 0.1 + 0.2}


#: float one compiled
def e025(r, x, n, word):
    return {"v": r['i'] + r['a']}


#: float one compiled
def e026(r, x, n, word):
    return {"v": r['i'] * r['a']}


#: float one compiled
def e027(r, x, n, word):
    return {"v": r['a'] // r['i']}


#: float one compiled
def e028(r, x, n, word):
    return {"v": r['i'] % r['a']}


#: float one compiled
def e029(r, x, n, word):
    return {"v": r['i'] / r['j']}


#: float one compiled
def e030(r, x, n, word):
    return {"v": float(r['i'])}


#: float one compiled
def e031(r, x, n, word):
    return {"v": r['i'] / 3}


#: float one compiled
def e032(r, x, n, word):
    return {"v": r['i'] / 1}


#: float one compiled
def e033(r, x, n, word):
    return {"v": float(r['flag'])}


#: float one compiled
def e034(r, x, n, word):
    return {"v": r['a'] + True}


#: float one compiled
def e035(r, x, n, word):
    return {"v": min(r['a'], r['b'])}


#: float one compiled
def e036(r, x, n, word):
    return {"v": max(r['a'], r['b'])}


#: float one compiled
def e037(r, x, n, word):
    return {"v": min(r['i'], r['a'])}


#: float one compiled
def e038(r, x, n, word):
    return {"v": max(r['a'], x, 0.0)}


#: float one compiled
def e039(r, x, n, word):
    return {"v": min(r['a'], 1.0)}


#: float one compiled
def e040(r, x, n, word):
    return {"v": abs(r['a'] - r['b'])}


#: float one compiled
def e041(r, x, n, word):
    return {"v": round(r['a'], 2)}


#: float one compiled
def e042(r, x, n, word):
    return {"v": round(r['a'], 0)}


#: float one compiled
def e043(r, x, n, word):
    return {"v": round(r['a'], 1)}


#: float one compiled
def e044(r, x, n, word):
    return {"v": round(r['b'] * x, 3)}


#: float one compiled
def e045(r, x, n, word):
    return {"v": math.sqrt(r['a'])}


#: float one compiled
def e046(r, x, n, word):
    return {"v": math.exp(r['a'])}


#: float one compiled
def e047(r, x, n, word):
    return {"v": math.log(r['a'])}


#: float one compiled
def e048(r, x, n, word):
    return {"v": math.log10(r['a'])}


#: float one compiled
def e049(r, x, n, word):
    return {"v": math.log2(r['a'])}


#: float one compiled
def e050(r, x, n, word):
    return {"v": math.fabs(r['a'])}


#: float one compiled
def e051(r, x, n, word):
    return {"v": math.sin(r['a'])}


#: float one compiled
def e052(r, x, n, word):
    return {"v": math.cos(r['a'])}


#: float one compiled
def e053(r, x, n, word):
    return {"v": math.tan(r['a'])}


#: float one compiled
def e054(r, x, n, word):
    return {"v": math.atan(r['a'])}


#: float one compiled
def e055(r, x, n, word):
    return {"v": math.tanh(r['a'])}


#: float one compiled
def e056(r, x, n, word):
    return {"v": math.pi * r['a']}


#: float one compiled
def e057(r, x, n, word):
    return {"v": math.sqrt(r['a'] * r['a'] + r['b'] * r['b'])}


#: float one compiled
def e058(r, x, n, word):
    return {"v": math.log(r['i'])}


#: float one compiled
def e059(r, x, n, word):
    return {"v": math.e ** r['a']}


#: float one compiled
def e060(r, x, n, word):
    return {"v": sqrt(r['b'])}


#: float one compiled
def e061(r, x, n, word):
    return {"v": r['a'] if r['flag'] else r['b']}


#: float one compiled
def e062(r, x, n, word):
    return {"v": r['a'] if r['a'] > r['b'] else r['b']}


#: float one compiled
def e063(r, x, n, word):
    return {"v": r['a'] or r['b']}


#: float one compiled
def e064(r, x, n, word):
    return {"v": r['a'] and r['b']}


#: float one compiled
def e065(r, x, n, word):
    return {"v": r['a'] or x}


#: float one compiled
def e066(r, x, n, word):
    return {"v": sum(r['xs'])}


#: float one compiled
def e067(r, x, n, word):
    return {"v": sum(r['xs']) / len(r['xs'])}


#: float one compiled
def e068(r, x, n, word):
    return {"v": max(r['xs'])}


#: float one compiled
def e069(r, x, n, word):
    return {"v": min(r['xs'])}


#: float one compiled
def e070(r, x, n, word):
    return {"v": sum(v * 2 for v in r['xs'])}


#: float one compiled
def e071(r, x, n, word):
    return {"v": sum(v for v in r['xs'] if v > 0)}


#: float one compiled
def e072(r, x, n, word):
    return {"v": r['xs'][0]}


#: float one compiled
def e073(r, x, n, word):
    return {"v": r['xs'][-1]}


#: float one compiled
def e074(r, x, n, word):
    return {"v": sum(r['ns']) * 0.5}


#: float one compiled
def e075(r, x, n, word):
    return {"v": r.get('a')}


#: float one compiled
def e076(r, x, n, word):
    return {"v": r.get('zzz')}


#: float one compiled
def e077(r, x, n, word):
    return {"v": x * n}


#: float one compiled
def e078(r, x, n, word):
    return {"v": x / n}


#: float one compiled
def e079(r, x, n, word):
    return {"v": x ** n}


#: float one compiled
def e080(r, x, n, word):
    return {"v": r['a'] * x + n}


#: float one compiled
def e081(r, x, n, word):
    return {"v": (r['a'] - r['b']) / (abs(r['a']) + abs(r['b']))}


#: float one compiled
def e082(r, x, n, word):
    return {"v": r['a'] / (1 + abs(r['b']))}


#: float one compiled
def e083(r, x, n, word):
    return {"v": 1e308 * r['a']}


#: float one compiled
def e084(r, x, n, word):
    return {"v": r['a'] * 1e-308}


#: float one compiled
def e085(r, x, n, word):
    return {"v": -r['a'] * -1.0}


#: float one compiled
def e086(r, x, n, word):
    return {"v": r['a'] - -0.0}


#: float one compiled
def e087(r, x, n, word):
    return {"v": 0.0 * -1.0 + r['a'] * 0.0}


#: int one compiled
def e088(r, x, n, word):
    return {"v": r['i'] + r['j']}


#: int one compiled
def e089(r, x, n, word):
    return {"v": r['i'] - r['j']}


#: int one compiled
def e090(r, x, n, word):
    return {"v": r['i'] * r['j']}


#: int one compiled
def e091(r, x, n, word):
    return {"v": r['i'] // r['j']}


#: int one compiled
def e092(r, x, n, word):
    return {"v": r['i'] % r['j']}


#: int one compiled
def e093(r, x, n, word):
    return {"v": -r['i']}


#: int one compiled
def e094(r, x, n, word):
    return {"v": abs(r['i'])}


#: int one compiled
def e095(r, x, n, word):
    return {"v": r['i'] ** 2}


#: int one compiled
def e096(r, x, n, word):
    return {"v": r['i'] ** 3}


#: int one compiled
def e097(r, x, n, word):
    return {"v": r['i'] * n}


#: int one compiled
def e098(r, x, n, word):
    return {"v": r['i'] // n}


#: int one compiled
def e099(r, x, n, word):
    return {"v": r['i'] % n}


#: int one compiled
def e100(r, x, n, word):
    return {"v": r['i'] + 1}


#: int one compiled
def e101(r, x, n, word):
    return {"v": r['i'] - 1}


#: int one compiled
def e102(r, x, n, word):
    return {"v": r['i'] // -3}


#: int one compiled
def e103(r, x, n, word):
    return {"v": r['i'] % -3}


#: int one compiled
def e104(r, x, n, word):
    return {"v": -7 // 2}


#: int one compiled
def e105(r, x, n, word):
    return {"v": -7 % 2}


#: int one compiled
def e106(r, x, n, word):
    return {"v": int(r['a'])}


#: int one compiled
def e107(r, x, n, word):
    return {"v": round(r['a'])}


#: int one compiled
def e108(r, x, n, word):
    return {"v": round(r['i'])}


#: int one compiled
def e109(r, x, n, word):
    return {"v": round(r['i'], 2)}


#: int one compiled
def e110(r, x, n, word):
    return {"v": math.floor(r['a'])}


#: int one compiled
def e111(r, x, n, word):
    return {"v": math.ceil(r['a'])}


#: int one compiled
def e112(r, x, n, word):
    return {"v": math.trunc(r['a'])}


#: int one compiled
def e113(r, x, n, word):
    return {"v": floor(r['b'])}


#: int one compiled
def e114(r, x, n, word):
    return {"v": len(r['s'])}


#: int one compiled
def e115(r, x, n, word):
    return {"v": len(r['xs'])}


#: int one compiled
def e116(r, x, n, word):
    return {"v": len(r['ns'])}


#: int one compiled
def e117(r, x, n, word):
    return {"v": sum(r['ns'])}


#: int one compiled
def e118(r, x, n, word):
    return {"v": max(r['ns'])}


#: int one compiled
def e119(r, x, n, word):
    return {"v": min(r['i'], r['j'], n)}


#: int one compiled
def e120(r, x, n, word):
    return {"v": max(r['i'], r['j'])}


#: int one compiled
def e121(r, x, n, word):
    return {"v": len([v for v in r['ns'] if v % 2 == 0])}


#: int one compiled
def e122(r, x, n, word):
    return {"v": sum(1 for v in r['xs'] if v > 0)}


#: int one compiled
def e123(r, x, n, word):
    return {"v": r['ns'][0] + r['ns'][-1]}


#: int one compiled
def e124(r, x, n, word):
    return {"v": r['i'] if r['i'] > 0 else -r['i']}


#: int one compiled
def e125(r, x, n, word):
    return {"v": r['i'] and r['j']}


#: int one compiled
def e126(r, x, n, word):
    return {"v": r['i'] or n}


#: int one compiled
def e127(r, x, n, word):
    return {"v": int(r['flag'])}


#: int one compiled
def e128(r, x, n, word):
    return {"v": r['flag'] + r['flag']}


#: int one compiled
def e129(r, x, n, word):
    return {"v": True * 3}


#: int one compiled
def e130(r, x, n, word):
    return {"v": r['i'] * 2 ** 10}


#: int one compiled
def e131(r, x, n, word):
    return {"v": 2 ** 62 + r['i']}


#: int one compiled
def e132(r, x, n, word):
    return {"v": (r['i'] + r['j']) // 2}


#: int one compiled
def e133(r, x, n, word):
    return {"v": int(r['i'] / 2)}


#: int one compiled
def e134(r, x, n, word):
    return {"v": r['j'] - r['i'] * 3}


#: string one compiled
def e135(r, x, n, word):
    return {"v": r['s'] + r['t']}


#: string one compiled
def e136(r, x, n, word):
    return {"v": r['s'].lower()}


#: string one compiled
def e137(r, x, n, word):
    return {"v": r['s'].upper()}


#: string one compiled
def e138(r, x, n, word):
    return {"v": r['s'].strip()}


#: string one compiled
def e139(r, x, n, word):
    return {"v": r['s'] + word}


#: string one compiled
def e140(r, x, n, word):
    return {"v": f"{r['s']}-{r['i']}"}


#: string one compiled
def e141(r, x, n, word):
    return {"v": f"{r['i']}"}


#: string one compiled
def e142(r, x, n, word):
    return {"v": f"id={r['id']} n={n}"}


#: string one compiled
def e143(r, x, n, word):
    return {"v": str(r['i'])}


#: string one compiled
def e144(r, x, n, word):
    return {"v": str(n)}


#: string one compiled
def e145(r, x, n, word):
    return {"v": str(r['flag'])}


#: string one compiled
def e146(r, x, n, word):
    return {"v": r['s'] if r['flag'] else r['t']}


#: string one compiled
def e147(r, x, n, word):
    return {"v": r['s'] or 'default'}


#: string one compiled
def e148(r, x, n, word):
    return {"v": r['s'][0]}


#: string one compiled
def e149(r, x, n, word):
    return {"v": r['s'][-1]}


#: string one compiled
def e150(r, x, n, word):
    return {"v": word + word}


#: string one compiled
def e151(r, x, n, word):
    return {"v": 'x' + r['s'].upper() + 'y'}


#: string one compiled
def e152(r, x, n, word):
    return {"v": r['s'].strip().lower()}


#: string one compiled
def e153(r, x, n, word):
    return {"v": str(r['s'])}


#: string one compiled
def e154(r, x, n, word):
    return {"v": f"{r['flag']}/{r.get('zzz')}"}


#: string one compiled
def e155(r, x, n, word):
    return {"v": r['t'] and r['s']}


#: string one compiled
def e156(r, x, n, word):
    return {"v": max(r['s'], r['t'])}


#: string one compiled
def e157(r, x, n, word):
    return {"v": min(r['s'], r['t'], word)}


#: bool one compiled
def e158(r, x, n, word):
    return {"v": r['a'] < r['b']}


#: bool one compiled
def e159(r, x, n, word):
    return {"v": r['a'] <= r['b']}


#: bool one compiled
def e160(r, x, n, word):
    return {"v": r['a'] == r['b']}


#: bool one compiled
def e161(r, x, n, word):
    return {"v": r['a'] != r['b']}


#: bool one compiled
def e162(r, x, n, word):
    return {"v": r['i'] == r['a']}


#: bool one compiled
def e163(r, x, n, word):
    return {"v": r['i'] < r['a']}


#: bool one compiled
def e164(r, x, n, word):
    return {"v": 0 < r['a'] < 1}


#: bool one compiled
def e165(r, x, n, word):
    return {"v": r['s'] == r['t']}


#: bool one compiled
def e166(r, x, n, word):
    return {"v": r['s'] < r['t']}


#: bool one compiled
def e167(r, x, n, word):
    return {"v": r['s'] == 'ABC'}


#: bool one compiled
def e168(r, x, n, word):
    return {"v": r['flag']}


#: bool one compiled
def e169(r, x, n, word):
    return {"v": not r['flag']}


#: bool one compiled
def e170(r, x, n, word):
    return {"v": r['flag'] and r['a'] > 0}


#: bool one compiled
def e171(r, x, n, word):
    return {"v": r['a'] > 0 or r['b'] > 0}


#: bool one compiled
def e172(r, x, n, word):
    return {"v": r['i'] is None}


#: bool one compiled
def e173(r, x, n, word):
    return {"v": r['s'] is not None}


#: bool one compiled
def e174(r, x, n, word):
    return {"v": 'a' in r['s']}


#: bool one compiled
def e175(r, x, n, word):
    return {"v": r['s'] in ['a', 'ABC']}


#: bool one compiled
def e176(r, x, n, word):
    return {"v": r['i'] in [1, 2, 3]}


#: bool one compiled
def e177(r, x, n, word):
    return {"v": r['a'] in [1.0, 2.5]}


#: bool one compiled
def e178(r, x, n, word):
    return {"v": r['s'].startswith('A')}


#: bool one compiled
def e179(r, x, n, word):
    return {"v": r['s'].endswith('o')}


#: bool one compiled
def e180(r, x, n, word):
    return {"v": any(v > 0 for v in r['xs'])}


#: bool one compiled
def e181(r, x, n, word):
    return {"v": all(v > 0 for v in r['xs'])}


#: bool one compiled
def e182(r, x, n, word):
    return {"v": any(r['xs'])}


#: bool one compiled
def e183(r, x, n, word):
    return {"v": all(r['ns'])}


#: bool one compiled
def e184(r, x, n, word):
    return {"v": bool(r['a'])}


#: bool one compiled
def e185(r, x, n, word):
    return {"v": bool(r['s'])}


#: bool one compiled
def e186(r, x, n, word):
    return {"v": bool(r['xs'])}


#: bool one compiled
def e187(r, x, n, word):
    return {"v": math.isnan(r['a'])}


#: bool one compiled
def e188(r, x, n, word):
    return {"v": math.isinf(r['a'])}


#: bool one compiled
def e189(r, x, n, word):
    return {"v": math.isfinite(r['a'])}


#: bool one compiled
def e190(r, x, n, word):
    return {"v": r['i'] % 2 == 0}


#: bool one compiled
def e191(r, x, n, word):
    return {"v": r['a'] == r['a']}


#: bool one compiled
def e192(r, x, n, word):
    return {"v": r['a'] != r['a']}


#: bool one compiled
def e193(r, x, n, word):
    return {"v": r['i'] >= n}


#: bool one compiled
def e194(r, x, n, word):
    return {"v": not r['s']}


#: bool one compiled
def e195(r, x, n, word):
    return {"v": r['a'] > x}


#: bool one compiled
def e196(r, x, n, word):
    return {"v": r['s'] not in ['', 'a']}


#: bool one compiled
def e197(r, x, n, word):
    return {"v": word in r['s']}


#: bool one compiled
def e198(r, x, n, word):
    return {"v": r['i'] == r['j'] == n}


#: bool one compiled
def e199(r, x, n, word):
    return {"v": r['a'] < r['b'] < x}


#: list one compiled
def e200(r, x, n, word):
    return {"v": [v * 2 for v in r['xs']]}


#: list one compiled
def e201(r, x, n, word):
    return {"v": [v for v in r['xs'] if v > 0]}


#: list one compiled
def e202(r, x, n, word):
    return {"v": r['xs']}


#: list one compiled
def e203(r, x, n, word):
    return {"v": [r['a'], r['b']]}


#: list one compiled
def e204(r, x, n, word):
    return {"v": [float(v) for v in r['ns']]}


#: list one compiled
def e205(r, x, n, word):
    return {"v": r['ns']}


#: list one compiled
def e206(r, x, n, word):
    return {"v": [v / 2 for v in r['ns']]}


#: list one compiled
def e207(r, x, n, word):
    return {"v": []}


#: int many compiled
def e208(w, x, n, word):
    return {"v": len(w)}


#: float many compiled
def e209(w, x, n, word):
    return {"v": sum(e['a'] for e in w)}


#: int many compiled
def e210(w, x, n, word):
    return {"v": max(e['i'] for e in w)}


#: bool many compiled
def e211(w, x, n, word):
    return {"v": any(e['flag'] for e in w)}


#: int many compiled
def e212(w, x, n, word):
    return {"v": len([e for e in w if e['s'] == 'ON_SALE'])}


#: float many compiled
def e213(w, x, n, word):
    return {"v": w[0]['a']}


#: string many compiled
def e214(w, x, n, word):
    return {"v": w[-1]['s']}


#: float many compiled
def e215(w, x, n, word):
    return {"v": sum(e['a'] * e['b'] for e in w)}


#: float many compiled
def e216(w, x, n, word):
    return {"v": min(e['b'] for e in w)}


#: bool many compiled
def e217(w, x, n, word):
    return {"v": all(e['i'] > 0 for e in w)}


#: int many compiled
def e218(w, x, n, word):
    return {"v": sum(e['i'] for e in w)}


#: float many compiled
def e219(w, x, n, word):
    return {"v": sum([e['a'] for e in w if e['flag']])}


#: string many compiled
def e220(w, x, n, word):
    return {"v": f"{len(w)} records"}


#: list many compiled
def e221(w, x, n, word):
    return {"v": [e['a'] for e in w]}


#: float one compiled
def avg_or_zero(r, x, n, word):
    xs = r["xs"]
    if not xs:
        return {"v": 0.0}
    return {"v": sum(xs) / len(xs)}


#: float one compiled
def clipped(r, x, n, word):
    v = r["a"] * x
    if v > 100.0:
        v = 100.0
    elif v < -100.0:
        v = -100.0
    return {"v": v}


#: int one compiled
def count_positive(r, x, n, word):
    total = 0
    for v in r["ns"]:
        if v > 0:
            total += 1
    return {"v": total}


#: float many compiled
def window_avg(w, x, n, word):
    total = 0.0
    count = 0
    for e in w:
        total += e["a"]
        count += 1
    if count == 0:
        return {"v": None}
    return {"v": total / count}


#: float many compiled
def on_sale_spent(w, x, n, word):
    on_sale = [e for e in w if e["s"] == "ON_SALE"]
    return {"v": sum(e["a"] for e in on_sale)}


#: string one compiled
def bucket(r, x, n, word):
    a = r["a"]
    if a < 0:
        label = "negative"
    elif a == 0:
        label = "zero"
    elif a < 10:
        label = "small"
    else:
        label = "large"
    return {"v": label}


#: float one compiled
def with_id(r, x, n, word):
    return {"id": r["id"], "v": r["a"] * x}


#: float one compiled
def keeps_time(r, x, n, word):
    return {"ts": r["ts"], "v": r["b"]}


#: float one compiled
def built_with_dict(r, x, n, word):
    return dict(v=r["a"] + r["b"])


#: float one compiled
def documented(r, x, n, word):
    """A docstring, an annotation, a pass."""
    scaled: float = r["a"] * x
    pass
    return {"v": scaled}


#: float one compiled
def feast_plus_val(r, x, n, word):
    # Feast's example view: conv_rate + val_to_add.
    return {"v": r["a"] + r["i"]}


#: float one compiled
def feast_rate_times(r, x, n, word):
    # Feast's example view: conv_rate * 2 and acc_rate + val.
    return {"v": r["a"] * 2 + r["b"]}


#: int one compiled
def math_from_import(r, x, n, word):
    return {"v": floor(r["a"] * 10) + ceil(r["b"])}


#: float one compiled
def uses_keyword_only(r, *, x, n, word):
    return {"v": r["a"] - x}


#: float one compiled
def default_unused(r, x, n, word, scale=2.0):
    return {"v": r["a"] * scale}


#: float one compiled
def early_return(r, x, n, word):
    for v in r["xs"]:
        if v < 0:
            return {"v": v}
    return {"v": 0.0}


#: int one compiled
def nested_if(r, x, n, word):
    if r["flag"]:
        if r["i"] > 0:
            return {"v": 1}
        return {"v": 2}
    return {"v": 3}


#: int one compiled
def unbound_sometimes(r, x, n, word):
    if r["flag"]:
        y = 1
    return {"v": y}


#: float one compiled
def divides_by_zero_sometimes(r, x, n, word):
    return {"v": 1.0 / r["b"]}


#: float one refused: every one of
def always_divides_by_zero(r, x, n, word):
    return {"v": 1.0 / (r["a"] - r["a"])}


#: int one compiled
def overflows_sometimes(r, x, n, word):
    return {"v": r["i"] * r["i"] * r["i"]}


#: float one refused: the global `SCALE`
def uses_global(r, x, n, word):
    return {"v": r["a"] * SCALE}


#: string one refused: a call of `json.dumps`
def calls_a_library(r, x, n, word):
    return {"v": json.dumps(r["s"])}


#: int one refused: a `while` statement
def loops_while(r, x, n, word):
    i = 0
    while i < 10:
        i += 1
    return {"v": i}


#: float one refused: a `try` statement
def catches(r, x, n, word):
    try:
        v = r["a"] / r["b"]
    except ZeroDivisionError:
        v = 0.0
    return {"v": v}


#: int one refused: a call of `recursive`
def recursive(r, x, n, word):
    if n <= 0:
        return {"v": 0}
    return recursive(r, x, n - 1, word)


#: float one refused: a `Lambda` expression
def uses_lambda(r, x, n, word):
    f = lambda v: v * 2
    return {"v": f(r["a"])}


#: float one refused: an expression statement
def prints(r, x, n, word):
    print(r["a"])
    return {"v": r["a"]}


#: list one refused: an expression statement
def appends(r, x, n, word):
    out = []
    out.append(r["a"])
    return {"v": out}


#: int one refused: a `Set` expression
def set_literal(r, x, n, word):
    return {"v": len({r["i"], r["j"]})}


#: int one refused: a `DictComp` expression
def dict_comprehension(r, x, n, word):
    return {"v": len({v: 1 for v in r["ns"]})}


#: int one refused: a comprehension of several `for`s
def nested_comprehension(r, x, n, word):
    return {"v": sum(a * b for a in r["ns"] for b in r["ns"])}


#: float one refused: `*args`, `**kwargs`
def takes_kwargs(r, **kwargs):
    return {"v": r["a"]}


#: float one refused: a decorator
@functools.lru_cache(maxsize=None)
def decorated(r, x, n, word):
    return {"v": r["a"]}


#: float one refused: a `global` statement
def declares_global(r, x, n, word):
    global COUNTER
    COUNTER = 1
    return {"v": r["a"]}


#: string one compiled
def formats_a_float(r, x, n, word):
    return {"v": str(r["a"])}


#: list one refused: a slice
def slices(r, x, n, word):
    return {"v": r["xs"][1:]}


#: list one refused: a call of `sorted`
def sorts(r, x, n, word):
    return {"v": sorted(r["xs"])}


#: string one refused: format spec
def formats(r, x, n, word):
    return {"v": f"{r['a']:.2f}"}


#: bool one refused: `is` with something other than None
def identity(r, x, n, word):
    return {"v": r["flag"] is True}


#: float one refused: attribute `.a` of a dict
def attribute_of_dict(r, x, n, word):
    return {"v": r.a}


#: float one refused: has no field `zzz`
def unknown_field(r, x, n, word):
    return {"v": r["zzz"]}


#: float one refused: has no field `w`
def unknown_output(r, x, n, word):
    return {"w": 1.0}


#: float one refused: the output's field `v` is not given
def misses_a_field(r, x, n, word):
    return {"id": r["id"]}


#: float one refused: every one of
def returns_none(r, x, n, word):
    return None


#: int one refused: the operator `BitAnd`
def bitwise(r, x, n, word):
    return {"v": r["i"] & r["j"]}


#: int one refused: the operator `~`
def inverts(r, x, n, word):
    return {"v": ~r["i"]}


#: int one refused: a `NamedExpr` expression
def walrus(r, x, n, word):
    return {"v": (y := r["i"]) + y}


#: int one refused: every one of
def parses_an_int(r, x, n, word):
    return {"v": int(r["s"])}


#: string one refused: every one of
def repeats(r, x, n, word):
    return {"v": r["s"] * 2}


#: float one refused: a `for` loop with an `else`
def for_else(r, x, n, word):
    for v in r["xs"]:
        pass
    else:
        v = 0.0
    return {"v": v}


#: float one refused: `break` or `continue`
def breaks(r, x, n, word):
    first = 0.0
    for v in r["xs"]:
        first = v
        break
    return {"v": first}


#: float one refused: a call of the method `.replace`
def replaces(r, x, n, word):
    return {"v": float(r["s"].replace(",", "."))}


#: float one refused: a `with` statement
def opens_a_file(r, x, n, word):
    with open("/etc/hostname") as f:
        data = f.read()
    return {"v": r["a"]}


#: float one refused: not one plain function definition
async def is_async(r, x, n, word):
    return {"v": r["a"]}


#: float one refused: a bare `return`
def bare_return(r, x, n, word):
    return


#: float one refused: `datetime.now()` in a plain UDF
def plain_now(r, x, n, word):
    return {"ts": datetime.now(), "v": r["a"]}


#: float one compiled
def utc_now(r, x, n, word):
    return {"ts": datetime.now(timezone.utc), "v": r["a"]}


#: float one refused: `datetime(...)`
def builds_a_time(r, x, n, word):
    return {"ts": datetime(2024, 1, 1), "v": r["a"]}


#: float one refused: an assignment to something other than one local name
def unpacks(r, x, n, word):
    a, b = r["a"], r["b"]
    return {"v": a + b}


#: float one refused: parameter `x` is assigned in the body
def reassigns_parameter(r, x, n, word):
    x = x * 2
    return {"v": r["a"] * x}


#: float one refused: the int literal
def huge_literal(r, x, n, word):
    return {"v": r["a"] + 100000000000000000000000}


#: float one refused: an expression statement
def generator(r, x, n, word):
    yield {"v": r["a"]}


#: string one compiled
def float_in_fstring(r, x, n, word):
    return {"v": f"a={r['a']} x={x}"}


#: string one compiled
def rounded_label(r, x, n, word):
    return {"v": "score=" + str(round(r["b"] * x, 2))}


#: string one compiled
def float_text_of_division(r, x, n, word):
    return {"v": str(r["i"] / 7)}


#: int one compiled
def counts_vowels(r, x, n, word):
    return {"v": len([c for c in r["s"] if c in "aeiou"])}


#: int one compiled
def counts_in_a_loop(r, x, n, word):
    total = 0
    for c in r["t"]:
        if c == "a":
            total += 1
    return {"v": total}


#: bool one compiled
def finds_a_letter_lazily(r, x, n, word):
    return {"v": any(c == "n" for c in r["t"])}


#: int one compiled
def counts_characters_of_a_key(r, x, n, word):
    return {"v": sum(1 for c in r["s"] + r["t"] if c != "b")}
