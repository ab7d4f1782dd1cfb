// Entry of the bundle Airflow's UI imports. The UI looks a React app up as globalThis[<its name>]
// (then globalThis.AirflowPlugin); the names match ui/plugin.py's react_apps.
import { HistoryView } from "./history.jsx";
import { TrainingJobView } from "./job.jsx";
import { ModelKitView } from "./modelkit.jsx";

// Also the bundle's own export (the IIFE's global AirflowTrainingCockpit): the pure parts the
// tests run in Chromium against the built file (tests/ui/test_chart_scales.py).
export { formatValue, stepAxis, valueAxis } from "./scales.js";
export { runLabels } from "./runs.js";

globalThis["Training job"] = TrainingJobView;
globalThis.ModelKit = ModelKitView;
globalThis["Training history"] = HistoryView;
globalThis.AirflowPlugin = TrainingJobView;
