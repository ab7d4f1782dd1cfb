// Entry of the bundle Airflow's UI imports. The UI looks a React app up as globalThis[<its name>]
// (then globalThis.AirflowPlugin); the names match ui/plugin.py's react_apps.
import { HistoryView } from "./history.jsx";
import { TrainingJobView } from "./job.jsx";
import { ModelKitView } from "./modelkit.jsx";

globalThis["Training job"] = TrainingJobView;
globalThis.ModelKit = ModelKitView;
globalThis["Training history"] = HistoryView;
globalThis.AirflowPlugin = TrainingJobView;
