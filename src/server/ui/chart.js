// chart.js - a time chart of counts per second (uPlot, vendor/uPlot.iife.min.js, global uPlot).

const COLORS = {allowed: "#1a7f37", denied: "#cf222e", shadow_denied: "#bc4c00",
  admitted: "#1a7f37", rejected: "#cf222e", in_flight: "#8250df"};

// A chart in el of the named series over x (unix seconds; plain seconds when time is false).
// data: [xs, ...one array per name]. Returns {update(data), destroy()}. The chart follows el's
// width. el's data-totals is the sum of each series the plot holds, as JSON ({"allowed": 5,
// ...}), and data-last each series' last point: what the chart shows, in a form a test can read.
export function timeChart(el, names, data, height, time = true) {
  const series = [{}].concat(names.map((name) => ({
    label: name.replace("_", " "),
    stroke: COLORS[name] || "#1f6feb",
    width: 1.5,
    fill: (COLORS[name] || "#1f6feb") + "1a",
    points: {show: false},
  })));
  const opts = {
    width: Math.max(el.clientWidth, 300),
    height: height || 180,
    series,
    scales: {x: {time}, y: {range: (u, min, max) => [0, Math.max(max, 1)]}},
    axes: [{}, {size: 50}],
    legend: {live: false},
    cursor: {drag: {x: false, y: false}},
  };
  const plot = new uPlot(opts, data, el);
  const totals = () => {
    const out = {};
    const last = {};
    names.forEach((name, i) => {
      const ys = plot.data[i + 1];
      out[name] = ys.reduce((a, v) => a + (v || 0), 0);
      last[name] = ys.length > 0 ? ys[ys.length - 1] : null;
    });
    el.dataset.totals = JSON.stringify(out);
    el.dataset.last = JSON.stringify(last);
  };
  totals();
  const resize = new ResizeObserver(() => {
    const w = Math.max(el.clientWidth, 300);
    if (w !== plot.width) plot.setSize({width: w, height: opts.height});
  });
  resize.observe(el);
  return {
    update: (d) => {
      plot.setData(d);
      totals();
    },
    destroy: () => {
      resize.disconnect();
      plot.destroy();
    },
  };
}
