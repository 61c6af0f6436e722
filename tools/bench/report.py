#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn tools/bench raw.csv into results.csv (median, spread), results.md
(tables as ratios against one rail and against the physical limit) and PNG
plots (gnuplot).  Usage: report.py RESULTS_DIR"""
import csv
import os
import statistics
import subprocess
import sys

SPREAD_WARN = 0.10      # (max - min) / median above this: too wide to trust


def load(path):
    groups = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            try:
                v = float(row['value'])
            except ValueError:
                continue
            key = (row['kind'], row['config'], row['rates'], row['op'],
                   int(row['qps']), int(row['size']), row['unit'])
            g = groups.setdefault(key, {'v': [], 'cpu': []})
            g['v'].append(v)
            if row.get('cpu_s_per_gb'):
                g['cpu'].append(float(row['cpu_s_per_gb']))
    return groups


def stats(vals):
    med = statistics.median(vals)
    spread = (max(vals) - min(vals)) / med if med else 0.0
    return med, spread


def limit(rates):
    return sum(float(r) for r in rates.split('+'))


def size_txt(s):
    return f'{s >> 20} MiB' if s >= 1 << 20 else f'{s >> 10} KiB'


def cfg_order(c):
    order = ['rail', 'lbond']
    return (order.index(c) if c in order else 2, c)


def cfg_name(c):
    return {'rail': 'one rail (plain rxe)',
            'lbond': 'rxe over Linux bond (xor, l3+4)'}.get(
                c, 'rdma_bond ' + c[len('rbond-'):] if c.startswith('rbond-') else c)


def main():
    d = sys.argv[1]
    groups = load(os.path.join(d, 'raw.csv'))
    wide = []
    with open(os.path.join(d, 'results.csv'), 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(['kind', 'config', 'rates', 'op', 'qps', 'size', 'unit', 'n',
                    'median', 'min', 'max', 'spread', 'x_one_rail', 'x_limit',
                    'cpu_s_per_gb'])
        for key in sorted(groups, key=lambda k: (k[0], k[2], k[3], k[4], k[5], k[6],
                                                 cfg_order(k[1]))):
            kind, cfg, rates, op, qps, size, unit = key
            med, spread = stats(groups[key]['v'])
            base = groups.get((kind, 'rail', rates, op, qps, size, unit))
            xr = med / stats(base['v'])[0] if base and stats(base['v'])[0] else ''
            xl = med / limit(rates) if kind == 'bw' else ''
            cpu = statistics.median(groups[key]['cpu']) if groups[key]['cpu'] else ''
            vals = groups[key]['v']
            w.writerow([kind, cfg, rates, op, qps, size, unit, len(vals), med,
                        min(vals), max(vals), round(spread, 3),
                        round(xr, 3) if xr != '' else '', round(xl, 3) if xl != '' else '',
                        cpu])
            if len(vals) > 1 and spread > SPREAD_WARN:
                wide.append(f'{cfg} {op} q{qps} {size_txt(size)} ({unit}): '
                            f'spread {spread:.0%} over {len(vals)} runs')
    md = []
    settings = os.path.join(d, 'settings.txt')
    if os.path.exists(settings):
        md += ['```', open(settings).read().rstrip(), '```', '']
    for rates in sorted({k[2] for k in groups}):
        works = sorted({(k[3], k[4], k[5]) for k in groups if k[0] == 'bw' and k[2] == rates},
                       key=lambda x: (x[0] != 'write', x[1], -x[2] if False else x[2]))
        cfgs = sorted({k[1] for k in groups if k[0] == 'bw' and k[2] == rates}, key=cfg_order)
        if not works:
            continue
        md.append(f'### Bandwidth, rails {rates} Mbit/s (limit {limit(rates):g} Mbit/s)')
        md.append('')
        md.append('Each cell: median Mbit/s on the wire, x one rail, fraction of the limit.')
        md.append('')
        md.append('| configuration | ' + ' | '.join(
            f'{op} {q} QP {size_txt(s)}' for op, q, s in works) + ' | CPU s/GB |')
        md.append('|---' * (len(works) + 2) + '|')
        for c in cfgs:
            cells, cpus = [], []
            for op, q, s in works:
                g = groups.get(('bw', c, rates, op, q, s, 'Mbit/s'))
                b = groups.get(('bw', 'rail', rates, op, q, s, 'Mbit/s'))
                if not g:
                    cells.append('-')
                    continue
                med, spread = stats(g['v'])
                xr = f'{med / stats(b["v"])[0]:.2f}x' if b and stats(b['v'])[0] else '?'
                flag = ' (!)' if len(g['v']) > 1 and spread > SPREAD_WARN else ''
                cells.append(f'{med:.1f} / {xr} / {med / limit(rates):.2f}{flag}')
                cpus += g['cpu']
            cpu = f'{statistics.median(cpus):.0f}' if cpus else '-'
            md.append(f'| {cfg_name(c)} | ' + ' | '.join(cells) + f' | {cpu} |')
        md.append('')
    lat = {k: v for k, v in groups.items() if k[0] == 'lat'}
    if lat:
        md.append('### Latency, 2 B (usec; ratio against one rail)')
        md.append('')
        md.append('| configuration | write p50 | write p99 | send p50 | send p99 |')
        md.append('|---|---|---|---|---|')
        for c in sorted({k[1] for k in lat}, key=cfg_order):
            cells = []
            for op in ('write', 'send'):
                for unit in ('usec p50', 'usec p99'):
                    k = [x for x in lat if x[1] == c and x[3] == op and x[6] == unit]
                    b = [x for x in lat if x[1] == 'rail' and x[3] == op and x[6] == unit]
                    if not k:
                        cells.append('-')
                        continue
                    m = stats(lat[k[0]]['v'])[0]
                    r = m / stats(lat[b[0]]['v'])[0] if b else 0
                    cells.append(f'{m:.1f} ({r:.2f}x)')
            md.append(f'| {cfg_name(c)} | ' + ' | '.join(cells) + ' |')
        md.append('')
    if wide:
        md.append('**Spread too wide to trust** (max-min over median > '
                  f'{SPREAD_WARN:.0%}):')
        md.append('')
        md += [f'- {x}' for x in wide]
        md.append('')
    with open(os.path.join(d, 'results.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')
    plots(d, groups)
    print('\n'.join(md))


def plots(d, groups):
    if subprocess.run(['which', 'gnuplot'], capture_output=True).returncode:
        return
    bw = {k: v for k, v in groups.items() if k[0] == 'bw'}
    for axis, idx, fname, xlabel in (('size', 5, 'bw_vs_size.png', 'message size (bytes)'),
                                     ('qps', 4, 'bw_vs_qps.png', 'QPs')):
        series = {}
        for k, v in bw.items():
            if k[3] != 'write':
                continue
            if axis == 'size' and k[4] != 1:
                continue
            if axis == 'qps' and k[5] != 1 << 20:
                continue
            series.setdefault((k[1], k[2]), []).append((k[idx], stats(v['v'])[0]))
        series = {s: sorted(p) for s, p in series.items() if len(p) > 1}
        if not series:
            continue
        dat = []
        cmds = []
        for i, ((cfg, rates), pts) in enumerate(sorted(series.items())):
            path = os.path.join(d, f'.plot_{axis}_{i}.dat')
            with open(path, 'w') as f:
                f.write('\n'.join(f'{x} {y}' for x, y in pts) + '\n')
            dat.append(path)
            cmds.append(f"'{path}' using 1:2 with linespoints title '{cfg_name(cfg)} [{rates}]'")
        script = (f"set terminal png size 900,560 noenhanced\nset output '{os.path.join(d, fname)}'\n"
                  f"set xlabel '{xlabel}'\nset ylabel 'Mbit/s on the wire'\nset grid\n"
                  f"set key bottom right\n" + ("set logscale x 2\n" if axis == 'size' else '') +
                  'plot ' + ', '.join(cmds) + '\n')
        subprocess.run(['gnuplot'], input=script, text=True)
        for p in dat:
            os.unlink(p)


if __name__ == '__main__':
    main()
