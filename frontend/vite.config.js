// Builds one IIFE file that Airflow's UI imports (react_apps bundle_url). React comes from the
// host page (Airflow exposes globalThis.React / ReactDOM / ReactJSXRuntime), so it is not bundled.
import { defineConfig } from "vite";

export default defineConfig({
  esbuild: { jsx: "automatic" },
  define: { "process.env.NODE_ENV": JSON.stringify("production") },
  build: {
    outDir: "../src/airflow_provider_training/ui/static",
    emptyOutDir: false,
    target: "es2020",
    lib: {
      entry: "src/main.jsx",
      name: "AirflowTrainingCockpit",
      formats: ["iife"],
      fileName: () => "cockpit.js",
    },
    rollupOptions: {
      external: ["react", "react-dom", "react/jsx-runtime"],
      output: {
        globals: { react: "React", "react-dom": "ReactDOM", "react/jsx-runtime": "ReactJSXRuntime" },
      },
    },
  },
});
