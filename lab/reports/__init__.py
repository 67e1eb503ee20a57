"""The reports: tables, pages, junit.xml, the browser that checks them."""
